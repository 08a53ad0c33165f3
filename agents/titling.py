"""A conversation's title, proposed by the lead's model once its first turn
has completed.

Until then (and whenever the proposal fails) the title is the first question
cut short (conversations.lifecycle). The proposal is bounded: one call of at most
TITLE_SECONDS, whose reply is cleaned and checked; a failed, slow or malformed
one keeps the cut-short title, and it never fails the turn, which is complete
before it is asked. A title the person chose is never replaced:
Conversation.metadata["title_source"] says who wrote the title, "user" (a
rename) or "model", and only a conversation with neither is retitled.
"""

import logging
import re
import time

from django.conf import settings
from django.db import transaction

from artifactflow import realtime
from artifactflow.names import name_line, name_shortened
from conversations.models import Conversation

from .budgets import BudgetSpent, spend_reserve, spend_settle
from .config import LEAD_AGENT
from .llm.base import TITLE_MAX_CHARS, TITLE_PROMPT, ChatModel
from .llm.config import AgentModels, models_from_settings
from .models import Run
from .tokens import messages_tokens

logger = logging.getLogger(__name__)

TITLE_SECONDS = 20.0
TITLE_SOURCE = "title_source"
SOURCE_USER, SOURCE_MODEL = "user", "model"
# The title's model call, in the usage figures and among the run's calls.
TITLE_KIND = "title"
# What the model is shown of the first turn: enough to name it.
QUESTION_CHARS, ANSWER_CHARS = 2000, 1000
# The reply read at most: a title is one short line.
REPLY_MAX_CHARS = 400

_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
_LABEL = re.compile(r"^(?:title|标题)\s*[:：]\s*", re.IGNORECASE)
_WRAPPING = "\"'“”‘’「」『』《》*_`#>- "


def title_propose(*, run: Run, models: AgentModels | None = None) -> str | None:
    """After a completed first turn: the lead's model (the turn's, unless
    `models` says otherwise) names the conversation. Returns the title stored,
    or None when the title stays as it was."""
    if not settings.MODEL_TITLES:
        return None
    message = run.message
    conversation = message.conversation
    if message.parent_id is not None or conversation.metadata.get(TITLE_SOURCE):
        return None
    try:
        models = models or models_from_settings(lead=run.lead_model)
        title = _title_asked(
            model=models.for_agent(LEAD_AGENT), run=run, question=message.content, answer=message.response
        )
    except BudgetSpent:
        logger.info("Conversation %s keeps its title: its owner's token budget for today is spent", conversation.pk)
        return None
    except Exception:
        # Whatever the model or its client does, the turn is done and the title stays.
        logger.warning("The title of conversation %s could not be had from its model", conversation.pk, exc_info=True)
        return None
    if title is None:
        logger.info("The model's title for conversation %s was unusable; the question names it", conversation.pk)
        return None
    try:
        stored = _title_store(conversation_id=conversation.pk, title=title)
    except Exception:
        # The run has ended: a database error here is the title's alone.
        logger.warning("The title of conversation %s could not be stored", conversation.pk, exc_info=True)
        return None
    return title if stored else None


def _title_asked(*, model: ChatModel, run: Run, question: str, answer: str) -> str | None:
    messages = [
        {"role": "system", "content": TITLE_PROMPT},
        {"role": "user", "content": f"Question:\n{question[:QUESTION_CHARS]}\n\nAnswer:\n{answer[:ANSWER_CHARS]}"},
    ]
    deadline = time.monotonic() + TITLE_SECONDS
    reply = []
    size = 0
    usage = None
    success = False
    # The title is the person's spending too: it is counted, and not asked once the budget is spent.
    reservation = spend_reserve(user=run.message.conversation.owner, estimate=messages_tokens(messages=messages))
    started = time.monotonic()
    stream = model.stream(messages)
    try:
        for delta in stream:
            if time.monotonic() > deadline:
                logger.info("The title took longer than %s s; given up", TITLE_SECONDS)
                return None
            usage = delta.usage or usage
            reply.append(delta.content)
            size += len(delta.content)
            if size > REPLY_MAX_CHARS:
                break
        success = True
    finally:
        # Closing the generator closes the HTTP stream to the model.
        stream.close()
        spend_settle(reservation=reservation, usage=usage, reply="".join(reply), model=model.name, kind=TITLE_KIND)
        _title_call_record(run=run, model=model, usage=usage, success=success, seconds=time.monotonic() - started)
    return title_clean("".join(reply), question=question)


def _title_call_record(*, run: Run, model: ChatModel, usage: dict | None, success: bool, seconds: float) -> None:
    """The title's call among the run's model calls, so that what the turn
    cost (its activity, the admin's trace) includes it."""
    # As stored: the turn's own end wrote them, and nothing writes them after the title.
    metrics = Run.objects.filter(pk=run.pk).values_list("metrics", flat=True).first() or {}
    metrics.setdefault("agent_executions", []).append(
        {
            "agent_name": TITLE_KIND,
            "model": model.name,
            "purpose": TITLE_KIND,
            "success": success,
            "token_usage": usage,
            "llm_duration_ms": int(seconds * 1000),
        }
    )
    Run.objects.filter(pk=run.pk).update(metrics=metrics)
    run.metrics = metrics


def title_clean(reply: str, *, question: str) -> str | None:
    """The model's reply as a title: its first line, without quotes, markup,
    a "Title:" label or characters that hide or reorder text (name_clean), at
    most TITLE_MAX_CHARS; None when nothing usable is left, or when a Chinese
    question got a title with no Chinese in it."""
    # A thinking model may write its reasoning in the text before the answer.
    reply = re.sub(r"<think>.*?(?:</think>|$)", "", reply, flags=re.DOTALL)
    # Cleaned first: a line of invisible characters is no line, and an override
    # before a quote would keep the quote.
    lines = [name_line(line) for line in reply.splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return None
    title = _LABEL.sub("", lines[0]).strip(_WRAPPING + "。.")
    if not title or "<tool_call" in title:
        return None
    title = name_shortened(title, limit=TITLE_MAX_CHARS)
    if _written_in_chinese(question) and not _HAN.search(title):
        return None
    return title


def _written_in_chinese(text: str) -> bool:
    # As the demo model tells (llm.demo.written_in_chinese): Han characters outnumber Latin words.
    return len(_HAN.findall(text)) > len(_LATIN_WORD.findall(text))


def _title_store(*, conversation_id, title: str) -> bool:
    """Stores the model's title unless someone titled the conversation meanwhile."""
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().filter(pk=conversation_id).first()
        if conversation is None or conversation.metadata.get(TITLE_SOURCE):
            return False
        metadata = {**conversation.metadata, TITLE_SOURCE: SOURCE_MODEL}
        # update(), not save(): a new title is no reason to move the conversation up the list.
        Conversation.objects.filter(pk=conversation_id).update(title=title, metadata=metadata)
        realtime.event_send_on_commit(conversation_id=conversation_id, type=realtime.TITLE_CHANGED, title=title)
    return True
