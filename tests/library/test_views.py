"""The team library's pages: adding, listing, searching, reading and removing
documents, and the snapshots of web pages agents read; another person's ids
on every URL."""

import lxml.html
import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from agents.services.execution import run_execute
from conversations import lifecycle
from library.models import LibraryDocument, WebSnapshot
from library.selectors import PAGE_MAX_CHARS
from library.services import library_document_create, library_document_read, snapshot_keep
from tests.agents.test_engine import call
from tests.factories import ConversationFactory, ConversationShareFactory, LibraryDocumentFactory, UserFactory
from tests.model_server import Text
from tests.web_pages import html_page

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}

HEAT_PUMPS_ZH = "# 热泵\n\n空气源热泵在寒冷气候中的性能。热泵的**效率**用COP衡量。"


def _upload(name: str, data: bytes = b"# Notes\n\nCobalt-free cathodes.", content_type: str = "text/markdown"):
    return SimpleUploadedFile(name, data, content_type=content_type)


def _page(response):
    return lxml.html.fromstring(response.content.decode())


@pytest.fixture
def two_clients(user, other_user):
    mine, theirs = Client(), Client()
    mine.force_login(user)
    theirs.force_login(other_user)
    return mine, theirs


def test_a_user_adds_reads_finds_and_removes_a_document(two_clients, user):
    client, _ = two_clients
    upload = _upload("热泵.md", HEAT_PUMPS_ZH.encode())

    added = client.post(reverse("library"), {"file": upload, "title": ""})
    document = LibraryDocument.objects.get()
    page = client.get(added["Location"])
    found = client.get(reverse("library"), {"q": "热泵的效率"})
    removed = client.post(reverse("library-document-delete", args=[document.pk]))

    assert added.status_code == 302 and added["Location"] == reverse("library-document", args=[document.pk])
    assert (document.title, document.uploaded_by, document.group) == ("热泵.md", user, None)
    assert page.status_code == 200
    assert _page(page).xpath("//h1")[0].text_content() == "热泵.md"
    assert _page(page).xpath("//article//h1")[0].text_content() == "热泵"
    assert _page(page).xpath("//article//strong")[0].text_content() == "效率"
    (item,) = _page(found).xpath("//li[@class='library-item']")
    assert item.xpath("a")[0].text_content() == "热泵.md"
    assert "热泵" in [mark.text_content() for mark in item.xpath(".//mark")]
    assert removed.status_code == 302 and removed["Location"] == reverse("library")
    assert not LibraryDocument.objects.exists()


def test_a_passage_link_opens_the_document_at_its_passage_marked(signed_in, user, other_user):
    sections = [("效率", "热泵的效率用COP衡量，寒冷地区会下降。"), ("噪声", "室外机一米处约五十分贝。")]
    content = "# 热泵\n\n" + "\n\n".join(f"## {name}\n\n{'天气晴朗。' * 200}\n\n{fact}" for name, fact in sections)
    document = LibraryDocumentFactory(title="热泵", content=content, uploaded_by=user)
    number = next(p.number for p in document.passages.all() if "五十分贝" in p.text)

    page = signed_in.get(reverse("library-document", args=[document.pk]), {"at": number})
    chinese = signed_in.get(
        reverse("library-document", args=[document.pk]), {"at": number}, HTTP_ACCEPT_LANGUAGE="zh-hans"
    )

    note = _page(page).xpath("//p[contains(@class, 'library-passage')]")[0].text_content()
    assert note == f"Passage {number} of {document.passages.count()} · 热泵 › 噪声"
    note = _page(chinese).xpath("//p[contains(@class, 'library-passage')]")[0].text_content()
    assert note == f"第 {number} 段，共 {document.passages.count()} 段 · 热泵 › 噪声"
    marks = _page(page).xpath("//article//mark")
    assert marks[0].get("id") == "passage"
    assert "五十分贝" in "".join(mark.text_content() for mark in marks)
    assert "COP" not in "".join(mark.text_content() for mark in marks)
    # A number the document has not, or no number, opens it unmarked and says nothing of passages.
    for at in ("999", "x", "1" * 12):
        other = signed_in.get(reverse("library-document", args=[document.pk]), {"at": at})
        assert other.status_code == 200 and not _page(other).xpath("//article//mark")
        assert not _page(other).xpath("//p[contains(@class, 'library-passage')]")


def test_another_users_group_document_is_no_page_at_any_passage(client, user, other_user):
    group = Group.objects.create(name="热泵组")
    user.groups.add(group)
    document = LibraryDocumentFactory(title="内部", content="热泵的效率。", uploaded_by=user, group=group)
    client.force_login(other_user)

    assert client.get(reverse("library-document", args=[document.pk]), {"at": 1}).status_code == 404


def test_a_search_results_link_marks_the_passage_on_the_document_page(signed_in, user):
    content = "# 热泵\n\n" + "天气晴朗。" * 40 + "\n\n热泵的效率用COP衡量。\n\n" + "风很大。" * 40
    document = LibraryDocumentFactory(title="热泵", content=content, uploaded_by=user)

    found = signed_in.get(reverse("library"), {"q": "热泵的效率"})
    href = _page(found).xpath("//li[@class='library-item']/a/@href")[0]
    page = signed_in.get(href)

    assert href.startswith(reverse("library-document", args=[document.pk]) + "?passage=") and href.endswith("#passage")
    marks = _page(page).xpath("//article//mark")
    assert marks[0].get("id") == "passage"
    marked = "".join(mark.text_content() for mark in marks)
    assert "热泵的效率用COP衡量" in marked and len(marked) < 60


def test_the_list_shows_everyone_s_documents_and_the_top_bar_links_it(two_clients, user, other_user):
    client, theirs = two_clients
    LibraryDocumentFactory(title="Mine", uploaded_by=user)
    LibraryDocumentFactory(title="Theirs", uploaded_by=other_user)

    response = theirs.get(reverse("library"))

    assert [a.text_content() for a in _page(response).xpath("//a[@class='library-title']")] == ["Theirs", "Mine"]
    assert _page(response).xpath("//header[@class='topbar']//a[@href='/library/']/@aria-current") == ["page"]
    assert _page(client.get(reverse("chat"))).xpath("//header[@class='topbar']//a[@href='/library/']")


def test_nobody_removes_another_s_document_but_staff(two_clients, user, other_user):
    _, theirs = two_clients
    document = LibraryDocumentFactory(title="Mine", uploaded_by=user)
    staff = Client()
    staff.force_login(UserFactory(is_staff=True))

    page = theirs.get(reverse("library-document", args=[document.pk]))
    refused = theirs.post(reverse("library-document-delete", args=[document.pk]))
    assert refused.status_code == 404 and LibraryDocument.objects.filter(pk=document.pk).exists()
    assert page.status_code == 200 and not _page(page).xpath("//form[contains(@action, '/delete/')]")

    removed = staff.post(reverse("library-document-delete", args=[document.pk]), **HTMX)
    assert removed.status_code == 200 and removed["HX-Redirect"] == reverse("library")
    assert not LibraryDocument.objects.filter(pk=document.pk).exists()


def test_a_document_limited_to_a_group_is_its_members_alone(two_clients, user, other_user):
    client, theirs = two_clients
    group = Group.objects.create(name="热泵组")
    user.groups.add(group)

    added = client.post(reverse("library"), {"file": _upload("内部.md", HEAT_PUMPS_ZH.encode()), "group": group.pk})
    document = LibraryDocument.objects.get()
    outsider_list = theirs.get(reverse("library"))
    outsider_search = theirs.get(reverse("library"), {"q": "热泵"})
    member_list = client.get(reverse("library"))

    assert added.status_code == 302 and document.group == group
    refused_page = theirs.get(reverse("library-document", args=[document.pk]))
    assert refused_page.status_code == 404
    assert "not available to you" in refused_page.content.decode() and "内部.md" not in refused_page.content.decode()
    assert theirs.post(reverse("library-document-delete", args=[document.pk])).status_code == 404
    assert "内部.md" not in outsider_list.content.decode() and "内部.md" not in outsider_search.content.decode()
    assert "Visible to 热泵组" in member_list.content.decode()
    # A group the user is not in is no choice.
    other = Group.objects.create(name="Other")
    refused = theirs.post(reverse("library"), {"file": _upload("x.md"), "group": other.pk})
    assert refused.status_code == 422 and LibraryDocument.objects.count() == 1


@pytest.mark.parametrize(
    ("name", "title"),
    [
        ("../../etc/passwd.md", "passwd.md"),
        ("nul\x00name.md", "nulname.md"),
        ("<script>alert(1)<b>.md", "<script>alert(1)<b>.md"),
        ("长" * 300 + ".md", None),
        # Would read "报告dm.exe" with the override.
        ("报告\u200f\u202eexe.md\u2066\u200b", "报告exe.md"),
    ],
)
def test_hostile_file_names_become_harmless_titles_and_files(signed_in, name, title, media_root):
    response = signed_in.post(reverse("library"), {"file": _upload(name)})

    document = LibraryDocument.objects.get()
    page = signed_in.get(reverse("library-document", args=[document.pk]))
    assert response.status_code == 302
    if title is not None:
        assert document.title == title
    assert len(document.title) <= 300 and document.title.endswith(".md") and "\x00" not in document.title
    stored = media_root / document.original_file.name
    assert stored.resolve().is_relative_to(media_root.resolve() / "library") and stored.read_bytes().startswith(
        b"# Notes"
    )
    assert b"<script>alert" not in page.content


def test_a_typed_title_keeps_nothing_that_hides_or_reorders_text(signed_in):
    response = signed_in.post(
        reverse("library"), {"file": _upload("notes.md"), "title": " \u202e我的\u200b标题\u200f\x01 第一版\u2069 "}
    )

    assert response.status_code == 302
    assert LibraryDocument.objects.get().title == "我的标题 第一版"


def test_an_unsupported_file_is_refused_with_a_clear_message_and_the_form_keeps_the_title(signed_in):
    response = signed_in.post(
        reverse("library"), {"file": _upload("setup.exe", b"MZ\x90\x00", ""), "title": "我的标题"}
    )

    assert response.status_code == 422 and not LibraryDocument.objects.exists()
    error = _page(response).xpath("//p[@id='library-file-error']")[0]
    assert error.text_content() == "setup.exe has no text we can read; upload markdown, text, Word (.docx) or PDF."
    assert _page(response).xpath("//input[@name='title']/@value") == ["我的标题"]


def test_an_oversize_file_is_refused_with_the_limit(signed_in, settings):
    settings.ARTIFACT_UPLOAD_MAX_BYTES = 1024

    response = signed_in.post(reverse("library"), {"file": _upload("big.md", b"x" * 2048), "title": "Big"})

    assert response.status_code == 422 and not LibraryDocument.objects.exists()
    assert _page(response).xpath("//p[@id='library-file-error']")[0].text_content() == (
        "This file is larger than the upload limit of 1.0\xa0KB."
    )
    assert _page(response).xpath("//input[@type='file']/@data-max-bytes") == ["1024"]


def test_a_missing_file_is_asked_for(signed_in):
    response = signed_in.post(reverse("library"), {"title": "No file"})

    assert response.status_code == 422
    assert _page(response).xpath("//p[@id='library-file-error']")[0].text_content() == "This field is required."


def test_a_long_document_s_page_shows_its_start(signed_in, user):
    document = LibraryDocumentFactory(content="词" * (PAGE_MAX_CHARS + 10), content_type="text/plain")

    response = signed_in.get(reverse("library-document", args=[document.pk]))

    text = _page(response).xpath("//article")[0].text_content()
    assert text.count("词") == PAGE_MAX_CHARS
    assert "its page shows the start of it" in response.content.decode()


def test_a_text_document_s_page_wraps_its_paragraphs_with_no_code_block(signed_in, user):
    upload = SimpleUploadedFile("会议纪要.txt", ("热泵测试在零下十度进行，" * 60 + "\n\n来源：library://9").encode())
    document = library_document_create(user=user, uploaded_file=upload)

    article = _page(signed_in.get(reverse("library-document", args=[document.pk]))).xpath("//article")[0]

    assert not article.xpath(".//pre") and article.xpath(".//div[@class='prose-text plain-lines']")
    assert len(article.xpath(".//p")) == 2
    assert article.xpath(".//a")[0].get("href") == reverse("library-document", args=[9])


def test_the_library_pages_need_a_sign_in(client):
    document = LibraryDocumentFactory()

    for url in (reverse("library"), reverse("library-document", args=[document.pk])):
        assert client.get(url).status_code == 302


def test_a_cited_library_source_and_link_in_an_answer_open_the_document_page(signed_in, user, scripted_model):
    content = "# 热泵\n\n" + "天气晴朗。" * 40 + "\n\n热泵的效率用COP衡量。\n\n" + "风很大。" * 40
    document = LibraryDocumentFactory(title="热泵手册", content=content)
    scripted_model.add(
        Text(call("call_subagent", agent="search_agent", instruction="找热泵的资料")),
        Text(call("web_search", query="热泵的效率")),
        Text(f"找到了 {document.url}"),
        Text(f"见[热泵手册]({document.url})。"),
    )
    conversation = lifecycle.conversation_start(user=user, content="热泵的效率如何？", enqueue=False)
    run = run_execute(run_id=conversation.active_branch.runs.get().pk)

    activity = _page(signed_in.get(reverse("run-activity", args=[run.pk])))
    (source,) = activity.xpath("//ul[@class='step-sources']//a")
    answer = _page(signed_in.get(conversation.get_absolute_url())).xpath("//a[text()='热泵手册']")[0]
    page = _page(signed_in.get(source.get("href")))

    page_url = reverse("library-document", args=[document.pk])
    assert source.text_content() == "热泵手册" and source.get("href").startswith(f"{page_url}?passage=")
    assert (source.get("target"), source.get("rel")) == ("_blank", "noopener noreferrer nofollow")
    assert answer.get("href") == page_url
    assert "热泵的效率用COP衡量" in "".join(mark.text_content() for mark in page.xpath("//article//mark"))


def test_a_long_library_lists_its_newest_documents_and_says_so(signed_in, monkeypatch):
    monkeypatch.setattr("library.selectors.LIST_LIMIT", 2)
    for title in ("Oldest", "Middle", "Newest"):
        LibraryDocumentFactory(title=title)

    response = signed_in.get(reverse("library"))

    assert [a.text_content() for a in _page(response).xpath("//a[@class='library-title']")] == ["Newest", "Middle"]
    assert "The newest 2 documents are listed; search to find the others." in response.content.decode()


# A page as the crawl agent read it, and as it says by the time someone reads the answer.
PRICES = ["空气源热泵的安装价格为每千瓦一千二百元，比去年下降了百分之八。", "北方地区的补贴政策仍然有效。"]
PRICES_LATER = ["空气源热泵的安装价格为每千瓦一千五百元。", "补贴已经取消。"]


def _read_turn(*, user, scripted_model, settings, url: str, answer: str):
    """A turn whose crawl agent reads `url` and whose lead answers `answer`."""
    settings.TOOL_PERMISSIONS = {"web_fetch": "auto"}
    scripted_model.add(
        Text(call("call_subagent", agent="crawl_agent", instruction=f"Read {url}")),
        Text(call("web_fetch", url=url)),
        Text("价格是每千瓦一千二百元。"),
        Text(answer),
    )
    conversation = lifecycle.conversation_start(user=user, content="热泵的安装价格是多少？", enqueue=False)
    run = run_execute(run_id=conversation.active_branch.runs.get().pk)
    return conversation, run


def test_a_page_an_agent_read_opens_as_it_was_read_from_the_activity_and_the_answer(
    signed_in, user, scripted_model, settings, web_pages
):
    web_pages.pages["/prices"] = html_page(title="今日热泵价格", paragraphs=PRICES)
    url = web_pages.url("/prices")
    conversation, run = _read_turn(
        user=user, scripted_model=scripted_model, settings=settings, url=url, answer=f"见[今日价格]({url})。"
    )
    web_pages.pages["/prices"] = html_page(title="今日热泵价格", paragraphs=PRICES_LATER)

    activity = _page(signed_in.get(reverse("run-activity", args=[run.pk])))
    (link,) = activity.xpath("//div[@class='step-sources']/a")
    snapshot = WebSnapshot.objects.get(conversation=conversation)
    chat = _page(signed_in.get(conversation.get_absolute_url()))
    opened = signed_in.get(reverse("source-open", args=[conversation.pk]), {"url": url})
    page = signed_in.get(link.get("href"))

    assert link.get("href") == reverse("snapshot", args=[snapshot.pk])
    assert chat.xpath("//main")[0].get("data-sources") == reverse("source-open", args=[conversation.pk])
    # The answer's link keeps the page's own address: static/js/sources.js opens it through source-open.
    assert chat.xpath("//a[text()='今日价格']")[0].get("href") == url
    assert opened.status_code == 302 and opened["Location"] == reverse("snapshot", args=[snapshot.pk])
    text = _page(page).xpath("//article")[0].text_content()
    assert "每千瓦一千二百元" in text and "一千五百元" not in text and "All rights reserved" not in text
    assert _page(page).xpath("//h1")[0].text_content() == "今日热泵价格"
    (live,) = _page(page).xpath("//p[@class='snapshot-live']/a")
    assert (live.get("href"), live.get("target"), live.get("rel")) == (url, "_blank", "noopener noreferrer nofollow")
    assert url in _page(page).xpath("//span[@class='snapshot-url']")[0].text_content()
    assert snapshot.digest[:12] in page.content.decode()


def test_a_citations_quote_is_marked_in_the_snapshot_and_one_it_lacks_is_said(signed_in, user):
    conversation = ConversationFactory(owner=user)
    snapshot = snapshot_keep(
        conversation_id=conversation.pk,
        url="https://heat.example/prices",
        title="今日热泵价格",
        content_type="text/html",
        text="# 今日热泵价格\n\n" + "\n\n".join(PRICES) + "\n\nHeat pumps cost **less** than last year.",
    )

    # Spaced differently from the page, across its emphasis.
    english = signed_in.get(reverse("snapshot", args=[snapshot.pk]), {"q": "Heat pumps  cost less"})
    chinese = signed_in.get(reverse("snapshot", args=[snapshot.pk]), {"q": "比去年下降了百分之八"})
    missing = signed_in.get(
        reverse("snapshot", args=[snapshot.pk]), {"q": "价格上涨了百分之二十"}, HTTP_ACCEPT_LANGUAGE="zh-hans"
    )
    via_link = signed_in.get(
        reverse("source-open", args=[conversation.pk]), {"url": "https://heat.example/prices/#top", "q": "补贴政策"}
    )

    marks = _page(english).xpath("//article//mark")
    assert marks[0].get("id") == "passage" and "".join(m.text_content() for m in marks) == "Heat pumps cost less"
    assert "".join(m.text_content() for m in _page(chinese).xpath("//article//mark")) == "比去年下降了百分之八"
    assert not _page(missing).xpath("//article//mark")
    note = _page(missing).xpath("//p[contains(@class, 'snapshot-unfound')]")[0].text_content()
    assert note == "此快照中没有所引用的文字：“价格上涨了百分之二十”"
    assert (
        via_link["Location"]
        == f"{reverse('snapshot', args=[snapshot.pk])}?q=%E8%A1%A5%E8%B4%B4%E6%94%BF%E7%AD%96#passage"
    )


def test_a_snapshot_is_its_conversations_readers_alone(client, user, other_user):
    conversation = ConversationFactory(owner=user)
    snapshot = snapshot_keep(
        conversation_id=conversation.pk,
        url="https://heat.example/internal",
        title="Internal prices",
        content_type="text/plain",
        text="Only the owner's team reads this.",
    )
    urls = [reverse("snapshot", args=[snapshot.pk]), reverse("source-open", args=[conversation.pk])]
    client.force_login(other_user)

    before = [client.get(url, {"url": snapshot.url}).status_code for url in urls]
    share = ConversationShareFactory(conversation=conversation, user=other_user)
    shared = [client.get(url, {"url": snapshot.url}).status_code for url in urls]
    share.delete()
    revoked = [client.get(url, {"url": snapshot.url}) for url in urls]

    assert before == [404, 404]
    assert shared == [200, 302]
    assert [response.status_code for response in revoked] == [404, 404]
    assert "Only the owner" not in revoked[0].content.decode()
    assert "snapshot of a web page does not exist" in revoked[0].content.decode()


@pytest.mark.parametrize(
    ("url", "live"),
    [
        ("https://heat.example/never-read", "https://heat.example/never-read"),
        ("javascript:alert(1)", None),
        ("", None),
    ],
)
def test_a_link_to_a_page_no_agent_read_says_so_and_offers_the_live_page(signed_in, user, url, live):
    conversation = ConversationFactory(owner=user)

    response = signed_in.get(reverse("source-open", args=[conversation.pk]), {"url": url})

    assert response.status_code == 200
    assert _page(response).xpath("//h1")[0].text_content() == "No snapshot of this page"
    assert _page(response).xpath("//p[@class='snapshot-live']/a/@href") == ([live] if live else [])


def test_several_files_are_added_at_once_and_the_list_follows_them_until_read(two_clients, user, other_user):
    client, theirs = two_clients
    files = [
        _upload("热泵.md", HEAT_PUMPS_ZH.encode()),
        _upload("scan.pdf", b"not a pdf at all", "application/pdf"),
        _upload("photo.png", b"\x89PNG\r\n\x1a\n", "image/png"),
    ]

    added = client.post(reverse("library"), {"file": files, "title": "ignored for several"}, follow=True)

    page = _page(added)
    notices = [notice.text_content() for notice in page.xpath("//p[contains(@class, 'notice')]")]
    assert notices == [
        "2 documents are being read; they are listed below.",
        "Not added: photo.png: not a kind of file the library reads (markdown, text, Word or PDF)",
    ]
    items = page.xpath("//ul[@id='library-items']")[0]
    assert items.get("hx-trigger") == "every 2s"
    assert [li.get("data-status") for li in items.xpath("li")] == ["queued", "queued"]
    assert "Its text is being read." in items.text_content()

    for document in LibraryDocument.objects.all():
        library_document_read(document_id=document.pk)
    polled = _page(client.get(reverse("library"), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="library-items"))
    assert polled.tag == "ul" and polled.get("hx-trigger") is None
    statuses = {li.xpath("a")[0].text_content(): li.get("data-status") for li in polled.xpath("li")}
    assert statuses == {"热泵.md": "indexed", "scan.pdf": "failed"}
    failed = LibraryDocument.objects.get(title="scan.pdf")
    (item,) = polled.xpath("li[@data-status='failed']")
    assert failed.error in item.text_content()
    assert item.xpath(".//form/@action") == [reverse("library-document-retry", args=[failed.pk])]
    # Someone else sees that it failed, but it is not theirs to read again.
    (their_item,) = _page(theirs.get(reverse("library"))).xpath("//li[@data-status='failed']")
    assert not their_item.xpath(".//form")
    assert theirs.post(reverse("library-document-retry", args=[failed.pk])).status_code == 404

    retried = client.post(reverse("library-document-retry", args=[failed.pk]))

    assert retried.status_code == 302
    failed.refresh_from_db()
    assert (failed.status, failed.error) == (LibraryDocument.Status.QUEUED, "")
    assert "Its text is being read." in _page(client.get(reverse("library-document", args=[failed.pk]))).text_content()
