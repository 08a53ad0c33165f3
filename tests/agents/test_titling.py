import pytest

from agents import titling
from agents.llm.base import TITLE_PROMPT
from agents.llm.config import AgentModels
from agents.llm.demo import DemoChatModel, demo_title
from agents.models import Run
from agents.services.execution import run_execute
from artifactflow import realtime
from conversations import lifecycle
from conversations.models import Conversation
from conversations.services import conversation_rename
from tests.agents.test_engine import call
from tests.model_server import Status, Text

pytestmark = pytest.mark.django_db

QUESTION = "How do air-source heat pumps perform when it is far below freezing outside?"
CHINESE_QUESTION = "空气源热泵在零下二十度的时候效率如何？请详细说明各种因素。"


@pytest.fixture
def titles(settings, scripted_model):
    settings.MODEL_TITLES = True
    return scripted_model


def _turn(user, question, *replies, model_server):
    """A first turn that answers at once, then the title's call answered by `replies`."""
    model_server.add(Text("The answer, **in short**."), *replies)
    conversation = lifecycle.conversation_start(user=user, content=question, enqueue=False)
    run = conversation.active_branch.runs.get()
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    conversation.refresh_from_db()
    return run, conversation


def test_the_lead_model_names_the_conversation_after_its_first_turn(user, titles, monkeypatch):
    sent = []
    monkeypatch.setattr(realtime, "event_send_on_commit", lambda **event: sent.append(event))

    run, conversation = _turn(user, QUESTION, Text('Title: "Heat pumps in deep cold"'), model_server=titles)

    assert run.status == Run.Status.COMPLETED
    assert conversation.title == "Heat pumps in deep cold"
    assert conversation.metadata["title_source"] == "model"
    title_request = titles.requests[1]["messages"]
    assert title_request[0] == {"role": "system", "content": TITLE_PROMPT}
    assert QUESTION in title_request[1]["content"] and "The answer" in title_request[1]["content"]
    # The page's head is told (live.consumers.title_changed).
    assert {"conversation_id": conversation.pk, "type": realtime.TITLE_CHANGED, "title": conversation.title} in sent


def test_a_chinese_question_gets_a_chinese_title(user, titles):
    _, conversation = _turn(user, CHINESE_QUESTION, Text("《空气源热泵的低温效率》。"), model_server=titles)

    assert conversation.title == "空气源热泵的低温效率"


# Every bidirectional control, and the other characters that show nothing.
HIDDEN = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u200b\ufeff\u00ad\U000e0041"


def test_a_title_that_hides_or_reorders_text_reaches_neither_the_database_nor_the_page(
    user, titles, client, monkeypatch
):
    sent = []
    monkeypatch.setattr(realtime, "event_send_on_commit", lambda **event: sent.append(event))
    # Would show as "…的低温效率exe.gpj": the override reverses what follows it.
    reply = Text(f"\u202e《空气源热泵\u200b的低温效率》\u2066jpg.exe\u2069\u200f\n{HIDDEN}")

    _, conversation = _turn(user, CHINESE_QUESTION, reply, model_server=titles)

    assert conversation.title == "空气源热泵的低温效率》jpg.exe"
    assert [event["title"] for event in sent if event["type"] == realtime.TITLE_CHANGED] == [conversation.title]
    client.force_login(user)
    page = client.get(conversation.get_absolute_url()).content.decode()
    assert page.count("空气源热泵的低温效率") >= 2
    assert not set(HIDDEN) & set(page)


def test_a_title_of_nothing_but_hidden_characters_keeps_the_question(user, titles):
    _, conversation = _turn(user, CHINESE_QUESTION, Text(f"{HIDDEN}\n\u202e"), model_server=titles)

    assert conversation.title == lifecycle._title_from(CHINESE_QUESTION)
    assert "title_source" not in conversation.metadata


def test_the_questions_title_hides_nothing_either(user):
    conversation = lifecycle.conversation_start(user=user, content=f"\u202e热泵{HIDDEN}效率如何？", enqueue=False)

    assert conversation.title == "热泵效率如何？"


@pytest.mark.parametrize(
    "reply",
    [
        Status(400, "bad request"),
        Text(""),
        Text("\n \n"),
        Text(call("web_search", query="x")),
        # A Chinese question named in English: not in the question's language.
        Text("Heat pump efficiency"),
    ],
    ids=["error", "empty", "blank", "tool-call", "wrong-language"],
)
def test_a_failed_or_malformed_title_keeps_the_question_and_the_turn(user, titles, reply):
    run, conversation = _turn(user, CHINESE_QUESTION, reply, model_server=titles)

    assert run.status == Run.Status.COMPLETED
    assert conversation.title == lifecycle._title_from(CHINESE_QUESTION)
    assert "title_source" not in conversation.metadata


def test_a_slow_title_is_given_up(user, titles, monkeypatch):
    monkeypatch.setattr(titling, "TITLE_SECONDS", 0.2)

    run, conversation = _turn(user, QUESTION, Text("Too late", wait=3.0), model_server=titles)

    assert run.status == Run.Status.COMPLETED
    assert conversation.title == lifecycle._title_from(QUESTION)


def test_a_long_title_is_cut_to_sixty_characters(user, titles):
    long = "Air-source heat pumps and their coefficient of performance in very cold climates compared"

    _, conversation = _turn(user, QUESTION, Text(long), model_server=titles)

    assert len(conversation.title) <= 60 and conversation.title.endswith("…")
    assert conversation.title.startswith("Air-source heat pumps and their coefficient")


def test_a_title_the_user_chose_is_never_replaced(user, titles):
    titles.add(Text("The answer."), Text("Model title"))
    conversation = lifecycle.conversation_start(user=user, content=QUESTION, enqueue=False)
    conversation_rename(conversation=conversation, title="我的标题")
    run = conversation.active_branch.runs.get()

    run_execute(run_id=run.pk)

    conversation.refresh_from_db()
    assert conversation.title == "我的标题"
    assert conversation.metadata["title_source"] == "user"
    assert len(titles.requests) == 1


def test_a_rename_while_the_title_is_asked_wins(user, titles, monkeypatch):
    asked = titling._title_asked

    def rename_meanwhile(**kwargs):
        title = asked(**kwargs)
        conversation_rename(conversation=Conversation.objects.get(owner=user), title="Renamed meanwhile")
        return title

    monkeypatch.setattr(titling, "_title_asked", rename_meanwhile)

    _, conversation = _turn(user, QUESTION, Text("Model title"), model_server=titles)

    assert conversation.title == "Renamed meanwhile"


def test_only_the_first_turn_is_titled(user, titles):
    _, conversation = _turn(user, QUESTION, Text("First title"), model_server=titles)
    titles.add(Text("A second answer."))
    message = lifecycle.message_post(conversation=conversation, content="And in summer?", enqueue=False)

    run_execute(run_id=message.runs.get().pk)

    conversation.refresh_from_db()
    assert conversation.title == "First title"
    assert len(titles.requests) == 3


def test_titles_can_be_turned_off(user, scripted_model):
    _, conversation = _turn(user, QUESTION, model_server=scripted_model)

    assert conversation.title == lifecycle._title_from(QUESTION)
    assert len(scripted_model.requests) == 1


@pytest.mark.parametrize(
    ("question", "title"),
    [
        (QUESTION, "Air-source heat pumps perform far below"),
        (CHINESE_QUESTION, "空气源热泵在零下二十度的时候效率"),
        ("请问 SQLite 的 WAL 模式是什么？", "SQLite 的 WAL 模式"),
        # Whole, not its first 20 characters.
        ("比较空气源热泵和家用储能电池在寒冷地区的适用性", "比较空气源热泵和家用储能电池在寒冷地区的适用性"),
    ],
)
def test_the_demo_model_proposes_a_title_from_the_questions_key_words(settings, user, question, title):
    settings.MODEL_TITLES = True
    assert demo_title(question) == title
    conversation = lifecycle.conversation_start(user=user, content=question, enqueue=False)
    message = conversation.active_branch
    message.response = "Demo answer."
    run = message.runs.get()

    stored = titling.title_propose(run=run, models=AgentModels(default=DemoChatModel(word_delay=0)))

    conversation.refresh_from_db()
    assert stored == conversation.title == title
