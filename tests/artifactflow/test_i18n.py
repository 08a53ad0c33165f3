"""The whole interface in Simplified Chinese: every page and fragment a person
sees, walked with real turns, artifacts and a run waiting for approval, shows
no English of the interface's own; and the catalogue that says it is complete
and shipped compiled."""

import gettext
import re
import uuid
from datetime import timedelta
from pathlib import Path

import lxml.html
import pytest
from babel.messages.pofile import read_po
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents.models import Run
from agents.services import execution, runs
from agents.services.execution import run_execute
from conversations import lifecycle
from conversations.models import Conversation
from tests.agents.test_engine import call
from tests.factories import PASSWORD, ConversationFactory, LibraryDocumentFactory, UserFactory
from tests.model_server import Text

pytestmark = pytest.mark.django_db

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-hans"}
HTMX = {"HTTP_HX_REQUEST": "true"}
PO = Path(settings.BASE_DIR) / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
MO = PO.with_suffix(".mo")

# Words and phrases of the interface's English: none may show on a page
# rendered in Chinese. Matched as whole ASCII words, so that "lead_agent" or
# "create_artifact" (names, shown as they are) do not count.
ENGLISH = [
    "Conversations?",
    "New",
    "Search",
    "Send",
    "Stop",
    "Artifacts?",
    "Delete",
    "Rename",
    "Edit",
    "Save",
    "Cancel",
    "Cancelled",
    "Preview",
    "Upload",
    "uploaded",
    "Compare",
    "Download",
    "Export",
    "Versions?",
    "version",
    "branch",
    "Today",
    "Yesterday",
    "Previous",
    "Approve",
    "Deny",
    "Always",
    "Activity",
    "Retry",
    "Sign",
    "Loading",
    "tool calls?",
    "worked",
    "waiting",
    "approval",
    "needs",
    "Keep",
    "Restore",
    "Show",
    "current",
    "Changes",
    "turn",
    "Untitled",
    "Load more",
    "No",
    "Skip",
    "Language",
    "Back",
    "Ask",
    "Task",
    "being written",
    "results?",
    "thinking",
    "working",
    "reading",
    "writing",
    "ms",
    "min",
    "Not found",
    "Your",
    "The",
    "This",
    "What",
    "They",
    "Username",
    "Password",
    "Queued",
    "Starting",
    "done",
    "Title",
    "Model use",
    "Model",
    "thinks",
    "answered",
    "chosen",
    "calls",
    "parameters",
    "report",
    "Steps",
    "Trace",
    "file",
    "the",
    "create",
    "update",
    "rewrite",
    "upload",
    "user_edit",
    "restore",
]
ENGLISH_RE = re.compile(r"(?<![A-Za-z_])(?:" + "|".join(ENGLISH) + r")(?![A-Za-z_])")
# Attributes whose text a person sees or hears, or app.js shows.
SHOWN_ATTRIBUTES = ("placeholder", "aria-label", "title", "alt", "hx-confirm", "data-unreachable", "data-expired")
SHOWN_ATTRIBUTES += ("data-failed", "data-too-large")


def shown_text(html: str) -> str:
    """What a page or fragment shows: its text (no script, no style) and the
    text of its attributes that are read. The language menu names each
    language in that language, "English" too, and is left out."""
    root = lxml.html.fromstring(f"<div>{html}</div>")
    for element in root.xpath("//script | //style | //select[@id='language-select']"):
        element.drop_tree()
    parts = [root.text_content()]
    for name in SHOWN_ATTRIBUTES:
        parts += root.xpath(f"//@{name}")
    return "\n".join(parts)


def english_in(html: str) -> list[str]:
    text = shown_text(html)
    return sorted({match.group(0) for match in ENGLISH_RE.finditer(text)})


def _turn(scripted_model, conversation, content: str, *replies: str) -> Run:
    for reply in replies:
        scripted_model.add(Text(reply))
    message = lifecycle.message_post(conversation=conversation, content=content, enqueue=False)
    run = message.runs.get()
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


@pytest.fixture
def research(user, scripted_model):
    """A conversation as a person leaves it: a report written and revised over
    two turns, a turn they stopped, and one waiting for them to approve a
    fetch; older conversations in each of the list's date groups."""
    LibraryDocumentFactory(title="热泵手册")
    conversation = ConversationFactory(owner=user, title="热泵研究")
    first = _turn(
        scripted_model,
        conversation,
        "请研究热泵的效率",
        call("create_artifact", id="hp_study", title="热泵报告", content="# 热泵\n\n热泵的效率很高。"),
        "热泵的能效系数通常在三到五之间。",
    )
    _turn(
        scripted_model,
        conversation,
        "请补充冬季的表现",
        call("update_artifact", id="hp_study", old_str="热泵的效率很高。", new_str="热泵在冬季效率会下降。"),
        "已经补充了冬季的表现。",
    )
    stopped = lifecycle.message_post(conversation=conversation, content="请再查一下价格", enqueue=False)
    runs.run_cancel(run_id=stopped.runs.get().pk, user=user)
    waiting = _turn(
        scripted_model,
        conversation,
        "请读一下这个网页",
        call("call_subagent", agent="crawl_agent", instruction="阅读关于热泵的网页"),
        call("web_fetch", url="https://example.com/热泵"),
    )
    assert first.status == Run.Status.COMPLETED and waiting.status == Run.Status.WAITING_PERMISSION
    now = timezone.now()
    for title, age in (("昨天的对话", 1), ("上周的对话", 5), ("上月的对话", 20), ("去年的对话", 400)):
        older = ConversationFactory(owner=user, title=title)
        Conversation.objects.filter(pk=older.pk).update(updated_at=now - timedelta(days=age))
    return conversation, first


def _pages(conversation, first_run):
    """Every page and fragment of a conversation, with how each is asked for."""
    pk = conversation.pk
    detail = reverse("artifact-detail", args=[pk, "hp_study"])
    return [
        ("get", reverse("chat"), {}),
        ("get", conversation.get_absolute_url(), {}),
        ("get", reverse("conversation-search"), {"q": "热泵", **HTMX}),
        ("get", reverse("conversation-search"), {"q": "没有这个", **HTMX}),
        ("get", reverse("run-activity", args=[first_run.pk]), HTMX),
        ("get", reverse("artifact-pane", args=[pk]), HTMX),
        ("get", detail, HTMX),
        ("get", f"{detail}?version=1", HTMX),
        ("get", f"{reverse('artifact-diff', args=[pk, 'report'])}?from=1&to=2", HTMX),
        ("get", reverse("artifact-edit", args=[pk, "hp_study"]), HTMX),
        ("get", reverse("artifact-delete", args=[pk, "hp_study"]), HTMX),
        ("get", f"{detail}?version=99", HTMX),
        ("post", reverse("message-create", args=[pk]), {"content": " ", **HTMX}),
        ("post", reverse("conversation-rename", args=[pk]), {"title": " ", **HTMX}),
        ("post", reverse("conversation-delete", args=[pk]), HTMX),
        ("get", reverse("conversation-detail", args=[uuid.uuid4()]), {}),
    ]


def _walk(client, pages, **headers) -> dict[str, list[str]]:
    found = {}
    for method, url, data in pages:
        data = dict(data)
        extra = {name: data.pop(name) for name in list(data) if name.startswith("HTTP_")}
        response = getattr(client, method)(url, data, **extra, **headers)
        assert response.status_code in (200, 404, 409, 422), (url, response.status_code)
        html = response.content.decode()
        assert "lang=" not in html or 'lang="zh-hans"' in html, url
        if english := english_in(html):
            found[f"{method} {url}"] = english
    return found


def test_every_page_and_fragment_is_chinese_when_the_browser_asks_for_it(client, user, research):
    conversation, first_run = research
    client.force_login(user)

    assert _walk(client, _pages(conversation, first_run), **ZH) == {}

    # The same pages in English do say what the check looks for.
    response = client.get(conversation.get_absolute_url(), HTTP_ACCEPT_LANGUAGE="en")
    assert {"Conversations", "Approve", "Artifacts"} <= set(english_in(response.content.decode()))


def test_a_user_who_chose_chinese_sees_it_whatever_the_browser_asks(client, scripted_model, settings):
    """The second user chose Chinese in the menu once; a browser asking for
    English, in a new session, still gets it."""
    settings.TOOL_PERMISSIONS = {}
    someone = UserFactory()
    first = Client()
    first.force_login(someone)
    first.post(reverse("language-set"), {"language": "zh-hans", "next": "/"})
    conversation = ConversationFactory(owner=someone, title="储能调研")
    run = _turn(
        scripted_model,
        conversation,
        "比较几种储能方案",
        call("create_artifact", id="hp_study", title="储能报告", content="锂电池与液流电池。"),
        "锂电池更常见。",
    )

    client.post(reverse("login"), {"username": someone.username, "password": PASSWORD}, HTTP_ACCEPT_LANGUAGE="en")
    assert _walk(client, _pages(conversation, run), HTTP_ACCEPT_LANGUAGE="en") == {}


def test_the_model_picker_and_the_model_an_answer_names_are_chinese(client, user, lead_models, scripted_model):
    conversation = ConversationFactory(owner=user, title="热泵研究", lead_model="fast")
    run = _turn(scripted_model, conversation, "请研究热泵的效率", "热泵的能效系数通常在三到五之间。")
    client.force_login(user)
    pages = [
        ("get", reverse("chat"), {}),
        ("get", conversation.get_absolute_url(), {}),
        ("get", reverse("run-activity", args=[run.pk]), HTMX),
        ("post", reverse("message-create", args=[conversation.pk]), {"content": "换个模型", "model": "gpt-5", **HTMX}),
    ]

    assert _walk(client, pages, **ZH) == {}
    page = shown_text(client.get(conversation.get_absolute_url(), **ZH).content.decode())
    assert "模型" in page and "深度思考 Deep · 先思考再回答" in page and "模型：快速 Fast" in page


def test_the_sign_in_pages_are_chinese_for_an_anonymous_browser_that_asks(client):
    for url in (reverse("login"), f"{reverse('login')}?next=/"):
        response = client.get(url, **ZH)
        assert english_in(response.content.decode()) == [], url
    refused = client.post(reverse("login"), {"username": "没有此人", "password": "错误"}, **ZH)
    assert "用户名和密码不匹配" in refused.content.decode()
    assert english_in(refused.content.decode()) == []

    for _ in range(settings.AXES_FAILURE_LIMIT):
        locked = client.post(reverse("login"), {"username": "张三", "password": "错误"}, **ZH)
    assert locked.status_code == 429
    assert "“张三”的密码错误次数过多：登录已锁定 15 分钟。" in locked.content.decode()
    assert english_in(locked.content.decode()) == []


def test_plurals_and_date_groups_are_chinese(client, user, research):
    conversation, first_run = research
    client.force_login(user)

    activity = shown_text(client.get(reverse("run-activity", args=[first_run.pk]), **ZH, **HTMX).content.decode())
    delete = shown_text(
        client.get(reverse("artifact-delete", args=[conversation.pk, "hp_study"]), **ZH, **HTMX).content.decode()
    )
    listing = client.get(reverse("chat"), **ZH).content.decode()

    # One tool call, and a report of two versions.
    assert "1 次工具调用" in activity
    assert "它的 2 个版本也会一并删除" in delete
    headings = [h.text_content() for h in lxml.html.fromstring(listing).xpath("//li[@class='conversation-group']/h2")]
    year = (timezone.localdate() - timedelta(days=400)).year
    assert headings[:4] == ["今天", "昨天", "过去 7 天", "过去 30 天"]
    assert re.fullmatch(rf"{year}年\d{{1,2}}月", headings[4])


def test_a_failed_turns_stored_message_is_shown_in_the_readers_language(client, user):
    """The worker stores its message in English; each reader sees it in theirs."""
    conversation = ConversationFactory(owner=user, title="失败的一轮")
    message = lifecycle.message_post(conversation=conversation, content="请研究", enqueue=False)
    Run.objects.filter(message=message).update(status=Run.Status.FAILED, error=execution.INTERNAL_ERROR)
    client.force_login(user)

    chinese = client.get(conversation.get_absolute_url(), **ZH).content.decode()
    english = client.get(conversation.get_absolute_url(), HTTP_ACCEPT_LANGUAGE="en").content.decode()

    assert "内部错误中止了本轮。此问题已记录。" in chinese
    assert execution.INTERNAL_ERROR in english


def _po_messages() -> dict:
    with PO.open("rb") as f:
        catalog = read_po(f)
    return {(message.context, message.id): message for message in catalog if message.id}


def _all_translated(message) -> bool:
    strings = message.string if isinstance(message.string, tuple) else (message.string,)
    return all(string.strip() for string in strings)


def test_every_message_of_the_catalogue_is_translated():
    messages = _po_messages()
    assert len(messages) > 300
    untranslated = [key for key, message in messages.items() if not _all_translated(message)]
    fuzzy = [key for key, message in messages.items() if message.fuzzy]
    assert untranslated == [] and fuzzy == []


def test_the_shipped_mo_is_the_po_compiled():
    """`make messages` compiles the .po into the .mo that ships; a .po edited
    without it leaves the interface saying the old words."""
    with MO.open("rb") as f:
        compiled = gettext.GNUTranslations(f)._catalog
    expected = {"": compiled[""]}
    for (context, msgid), message in _po_messages().items():
        prefix = f"{context}\x04" if context else ""
        if isinstance(msgid, tuple):
            for index, text in enumerate(message.string):
                expected[(prefix + msgid[0], index)] = text
        else:
            expected[prefix + msgid] = message.string
    assert compiled == expected


def test_the_admins_own_pages_are_chinese_too(staff_client, research):
    """Django's admin brings its own translations; the trace, the purge page
    and the cleanup's dry run are ours."""
    conversation, first_run = research
    trace = staff_client.get(reverse("admin:agents_run_change", args=[first_run.pk]), **ZH).content.decode()
    purge = staff_client.get(reverse("admin:agents_run_purge_chunks"), **ZH).content.decode()
    cleanup = staff_client.post(
        reverse("admin:conversations_conversation_changelist"),
        {"action": "artifacts_cleanup", "_selected_action": [conversation.pk]},
        **ZH,
    ).content.decode()

    for heading in ("追踪", "权限决定", "已获取的来源", "已写入的产物", "时间线"):
        assert f">{heading}</h" in trace
    assert "清除流式文本" in purge and "计数（试运行）" in purge
    assert "这是试运行：没有移除任何内容。" in cleanup
    ours = ("Trace", "Permission decisions", "Sources fetched", "Timeline", "Purge streamed text", "dry run")
    assert [word for word in ours if word in trace + purge + cleanup] == []
