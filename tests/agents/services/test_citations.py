"""The citation check after a turn (agents.services.citations), through real
turns: the crawl agent reads a page on this machine, the lead writes a report
and an answer that quote it, a library document and a page nobody read; each
quotation is looked for in its source as the agents read it."""

import lxml.html
import pytest
from django.urls import reverse

from agents.services import citations
from agents.services.execution import run_execute
from conversations import lifecycle
from library.services import library_document_create
from tests.agents.test_engine import call
from tests.model_server import Text
from tests.web_pages import html_page

pytestmark = pytest.mark.django_db

PRICES = [
    "空气源热泵的安装价格为每千瓦一千二百元，比去年下降了百分之八。",
    "The median seasonal efficiency (SCOP) was 3.1 across the 212 surveyed homes.",
]
HANDBOOK = "# 热泵手册\n\n## 噪声\n\n室外机一米处约五十分贝，夜间应低于四十五分贝。"


def _turn(*, user, scripted_model, settings, web_pages, report: str, answer: str):
    settings.TOOL_PERMISSIONS = {"web_fetch": "auto"}
    url = web_pages.url("/prices")
    scripted_model.add(
        Text(call("call_subagent", agent="crawl_agent", instruction=f"Read {url}")),
        Text(call("web_fetch", url=url)),
        Text("价格是每千瓦一千二百元。"),
        Text(call("create_artifact", id="report", title="热泵报告", content=report)),
        Text(answer),
    )
    conversation = lifecycle.conversation_start(user=user, content="热泵的价格和效率？", enqueue=False)
    run = run_execute(run_id=conversation.active_branch.runs.get().pk)
    run.message.refresh_from_db()
    return conversation, run


@pytest.fixture
def sources(web_pages, user):
    web_pages.pages["/prices"] = html_page(title="今日热泵价格", paragraphs=PRICES)
    document = library_document_create(user=user, title="热泵手册", content=HANDBOOK)
    return {
        "prices": web_pages.url("/prices"),
        "handbook": f"library://{document.pk}#2",
        "unread": web_pages.url("/never-read"),
    }


def _sources_list(sources) -> str:
    return (
        "\n\n## 参考资料\n"
        f"[1] [今日热泵价格]({sources['prices']})\n"
        f"[2] [热泵手册]({sources['handbook']})\n"
        f"[3] [Unread]({sources['unread']})\n"
    )


def test_real_quotations_pass_however_spelt_and_an_invented_one_is_marked(
    client, user, scripted_model, settings, web_pages, sources
):
    report = (
        "# 热泵报告\n\n"
        # Spaces for the source's comma, full-width digits and letters, straight quotes for curly.
        '价格“每千瓦一千二百元 比去年下降了百分之八”[1]。效率 "median seasonal efficiency (ＳＣＯＰ) was ３.１" [1]。\n\n'
        "噪声“室外机一米处约五十分贝”[2]，但“价格上涨了百分之二十”[1]。另一个网站说“热泵很安静”[3]。"
        + _sources_list(sources)
    )
    answer = "见报告。安装“每千瓦八百元”[1]。" + _sources_list(sources)

    conversation, run = _turn(
        user=user, scripted_model=scripted_model, settings=settings, web_pages=web_pages, report=report, answer=answer
    )

    check = run.message.metadata["citations"]
    assert (check["checked"], check["unchecked"]) == (5, 1)
    assert check["missing"] == [
        {"where": "", "number": 1, "quote": "每千瓦八百元", "title": "今日热泵价格"},
        {"where": "report", "number": 1, "quote": "价格上涨了百分之二十", "title": "今日热泵价格"},
    ]

    client.force_login(user)
    page = lxml.html.fromstring(client.get(conversation.get_absolute_url()).content.decode())
    (unfound,) = page.xpath("//div[@class='answer']//a[contains(@class, 'citation-unfound')]")
    assert unfound.get("data-quote") == "每千瓦八百元"
    assert unfound.getnext().text_content() == "✦ not found in [1]"
    summary = page.xpath("//div[contains(@class, 'citation-check')]/p")[0].text_content()
    assert summary == (
        "5 quotations checked against their sources · ✦ 2 not found · 1 not checked: no text of its source was kept"
    )
    pane = lxml.html.fromstring(
        client.get(reverse("artifact-detail", args=[conversation.pk, "report"])).content.decode()
    )
    marked = pane.xpath("//div[contains(@class, 'artifact-content')]//a[contains(@class, 'citation-unfound')]")
    assert [a.get("data-quote") for a in marked] == ["价格上涨了百分之二十"]
    found = pane.xpath("//div[contains(@class, 'artifact-content')]//a[@class='citation']")
    assert len(found) == 4
    activity = lxml.html.fromstring(client.get(reverse("run-activity", args=[run.pk])).content.decode())
    items = [li.text_content() for li in activity.xpath("//div[contains(@class, 'citation-check')]//li")]
    assert items == [
        "“每千瓦八百元” — not found in [1] 今日热泵价格",
        "“价格上涨了百分之二十” — not found in [1] 今日热泵价格 (in report)",
    ]


def test_a_turn_that_quotes_nothing_keeps_no_check(user, scripted_model, settings, web_pages, sources):
    _, run = _turn(
        user=user,
        scripted_model=scripted_model,
        settings=settings,
        web_pages=web_pages,
        report="# 热泵报告\n\n价格下降了 [1]。" + _sources_list(sources),
        answer="见报告。",
    )

    assert "citations" not in run.message.metadata


def test_quotations_past_the_checks_time_are_counted_unchecked(
    user, scripted_model, settings, web_pages, sources, monkeypatch
):
    monkeypatch.setattr(citations, "CHECK_SECONDS", 0)
    _, run = _turn(
        user=user,
        scripted_model=scripted_model,
        settings=settings,
        web_pages=web_pages,
        report="# 热泵报告\n\n“每千瓦一千二百元”[1]，“价格上涨了”[1]。" + _sources_list(sources),
        answer="见报告。",
    )

    assert run.message.metadata["citations"] == {"checked": 0, "unchecked": 2, "missing": []}
