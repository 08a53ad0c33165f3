import io
import time
import zipfile
from datetime import timedelta

import docx
import lxml.html
import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from django_q.models import OrmQ, Schedule

from agents.selectors import library_titles
from agents.tools.base import ToolContext
from agents.tools.search import web_search
from agents.tools.web import library_document_fetch, web_fetch
from artifacts.uploads import UploadError
from library.apps import SWEEP_SCHEDULE
from library.models import LibraryDocument, LibraryPassage
from library.selectors import library_search, library_url_passage
from library.services import (
    library_document_create,
    library_document_read,
    library_document_retry,
    library_documents_queue,
    library_sweep,
)
from tests.factories import LibraryDocumentFactory, UserFactory, docx_of_xml, pdf_bytes

pytestmark = pytest.mark.django_db

WAL = (
    "SQLite write-ahead logging lets readers continue while a writer appends to the WAL file. "
    "A checkpoint copies pages back into the database."
)
BATTERIES = "Solid-state batteries use a ceramic electrolyte instead of a flammable liquid one."
RAG = "Retrieval-augmented generation puts retrieved passages into the prompt of a language model."


@pytest.fixture
def library(user):
    return {
        "wal": library_document_create(user=user, title="SQLite WAL mode", content=WAL),
        "batteries": library_document_create(user=user, title="Solid-state batteries", content=BATTERIES),
        "rag": library_document_create(user=user, title="Retrieval-augmented generation", content=RAG),
    }


# --- Creating documents --------------------------------------------------------


def test_markdown_upload_keeps_its_text_and_the_file(user):
    upload = SimpleUploadedFile("notes.md", b"# Notes\n\nCobalt-free cathodes.", content_type="text/markdown")

    document = library_document_create(user=user, uploaded_file=upload)

    assert (document.title, document.content_type) == ("notes.md", "text/markdown")
    assert document.content == "# Notes\n\nCobalt-free cathodes."
    assert document.uploaded_by == user
    assert document.original_file.name.startswith("library/")
    assert document.original_file.read() == b"# Notes\n\nCobalt-free cathodes."


def test_text_upload_with_a_title(user):
    upload = SimpleUploadedFile("raw.txt", b"Plain words about zeolites.")

    document = library_document_create(user=user, title="Zeolites", uploaded_file=upload)

    assert (document.title, document.content, document.content_type) == (
        "Zeolites",
        "Plain words about zeolites.",
        "text/plain",
    )
    assert [hit.title for hit in library_search(query="zeolites", limit=5)] == ["Zeolites"]


def test_docx_upload_becomes_searchable_markdown(user):
    word = docx.Document()
    word.add_heading("Perovskite cells", level=1)
    word.add_paragraph("Perovskite solar cells degrade in humid air.")
    buffer = io.BytesIO()
    word.save(buffer)

    document = library_document_create(user=user, uploaded_file=SimpleUploadedFile("cells.docx", buffer.getvalue()))

    assert document.content == "# Perovskite cells\n\nPerovskite solar cells degrade in humid air."
    assert library_search(query="humid perovskite", limit=5)[0].url == f"{document.url}#1"


def test_pdf_upload_becomes_searchable_text(user):
    document = library_document_create(
        user=user, uploaded_file=SimpleUploadedFile("paper.pdf", pdf_bytes(["Graphene membranes filter seawater"]))
    )

    assert document.content_type == "text/plain"
    assert "Graphene membranes filter seawater" in document.content
    assert library_search(query="graphene", limit=5)[0].url == f"{document.url}#1"


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("photo.png", b"\x89PNG\r\n\x1a\n", "no text we can read"),
        ("empty.md", b"  \n", "contains no text"),
        ("broken.pdf", b"%PDF-1.4 nothing", "Could not read this PDF"),
    ],
)
def test_unreadable_uploads_are_refused(user, name, data, message):
    with pytest.raises(UploadError, match=message):
        library_document_create(user=user, uploaded_file=SimpleUploadedFile(name, data))
    assert not LibraryDocument.objects.exists()


def test_uploads_over_the_size_limit_are_refused(user, settings):
    settings.ARTIFACT_UPLOAD_MAX_BYTES = 10

    with pytest.raises(UploadError, match="larger than the upload limit of 10\xa0bytes"):
        library_document_create(user=user, uploaded_file=SimpleUploadedFile("big.txt", b"x" * 11))


# --- Searching -------------------------------------------------------------------


def test_the_relevant_document_ranks_first_with_a_snippet(library):
    hits = library_search(query="How does a WAL checkpoint work?", limit=5)

    assert hits[0].title == "SQLite WAL mode"
    # Its first passage: the document is one.
    assert hits[0].url == f"{library['wal'].url}#1" == f"library://{library['wal'].pk}#1"
    assert "checkpoint" in hits[0].snippet.lower()


def test_words_match_their_other_forms(library):
    # "electrolytes" finds "electrolyte": both databases stem English words.
    assert [hit.title for hit in library_search(query="electrolytes", limit=5)] == ["Solid-state batteries"]


def test_limit_and_no_match(library):
    assert len(library_search(query="sqlite batteries retrieval", limit=2)) == 2
    assert library_search(query="photosynthesis", limit=5) == []


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "*",
        "NEAR(",
        "-",
        "OR",
        "AND NOT",
        '"unclosed',
        "title:wal",
        "wal*",
        "(((",
        "^",
        "",
        "   ",
        "!@#$%^&*()",
        "NEAR(wal checkpoint, 2)",
    ],
)
def test_hostile_queries_never_fail(library, query):
    hits = library_search(query=query, limit=5)

    assert isinstance(hits, list)


def test_operators_are_words_not_syntax(library):
    # On SQLite "NEAR(wal" would be a syntax error; here it is the word "wal".
    assert library_search(query="NEAR(wal", limit=5)[0].title == "SQLite WAL mode"


def test_updates_and_deletes_keep_the_index_in_sync(library):
    document = library["batteries"]
    document.content = "Sodium-ion cells avoid lithium entirely."
    document.save()

    assert library_search(query="ceramic", limit=5) == []
    assert [hit.url for hit in library_search(query="sodium", limit=5)] == [f"{document.url}#1"]

    # A bulk update bypasses save(); the document's index follows it anyway,
    # and it decides what is found. Its passages catch up on library_reindex.
    LibraryDocument.objects.filter(pk=document.pk).update(title="Sodium batteries", content="Prussian blue cathodes.")
    assert library_search(query="sodium", limit=5)[0].title == "Sodium batteries"
    assert library_search(query="lithium", limit=5) == []
    call_command("library_reindex", verbosity=0)
    assert "**Prussian**" in library_search(query="prussian", limit=5)[0].snippet

    document.delete()
    assert library_search(query="sodium prussian", limit=5) == []
    assert [hit.title for hit in library_search(query="sqlite", limit=5)] == ["SQLite WAL mode"]


# --- Fetching ----------------------------------------------------------------------


def test_fetch_returns_the_document_escaped(user):
    document = LibraryDocumentFactory(title='Q&A "notes"', content="a < b & c", content_type="text/plain")

    result = library_document_fetch(url=document.url)

    assert result.success
    assert result.content == (
        f'<page url="library://{document.pk}" title=\'Q&amp;A "notes"\' content_type="text/plain">'
        "<content>a &lt; b &amp; c</content></page>"
    )
    assert result.output == {
        "kind": "page",
        "source": {"title": 'Q&A "notes"', "url": f"library://{document.pk}", "excerpt": "a < b & c"},
    }


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("library://999999", "There is no library document library://999999"),
        ("library://99999999999999999999999", "There is no library document"),
        ("library://", "is not a library URL"),
        ("library://abc", "is not a library URL"),
        ("https://example.com/", "is not a library URL"),
    ],
)
def test_fetch_of_unknown_or_malformed_urls_is_a_clear_error(url, message):
    result = library_document_fetch(url=url)

    assert not result.success
    assert result.content.startswith('<error tool="web_fetch">')
    assert message in result.content


# --- Admin -------------------------------------------------------------------------


@pytest.fixture
def staff_client(client):
    staff = UserFactory(is_staff=True, is_superuser=True)
    client.force_login(staff)
    client.staff = staff
    return client


def test_staff_upload_through_the_admin(staff_client):
    upload = SimpleUploadedFile("wal-notes.md", b"# WAL\n\nCheckpoints move pages home.", content_type="text/markdown")

    response = staff_client.post(reverse("admin:library_librarydocument_add"), {"original_file": upload, "title": ""})

    document = LibraryDocument.objects.get()
    assert response.status_code == 302
    assert (document.title, document.content, document.uploaded_by) == (
        "wal-notes.md",
        "# WAL\n\nCheckpoints move pages home.",
        staff_client.staff,
    )
    assert library_search(query="checkpoints", limit=5)[0].url == f"{document.url}#1"


def test_admin_shows_an_unreadable_upload_on_the_form(staff_client):
    upload = SimpleUploadedFile("photo.png", b"\x89PNG\r\n\x1a\n")

    response = staff_client.post(
        reverse("admin:library_librarydocument_add"), {"original_file": upload, "title": "Photo"}
    )

    assert response.status_code == 200
    assert "no text we can read" in response.content.decode()
    assert not LibraryDocument.objects.exists()


def test_admin_refuses_a_crafted_word_document_on_the_form_in_time(staff_client):
    # 10 MB of XML in 60 KB: 44 s of python-docx before.
    upload = SimpleUploadedFile("bomb.docx", docx_of_xml(b"<w:p><w:r><w:t>x</w:t></w:r></w:p>", repeat=300_000))
    started = time.perf_counter()

    response = staff_client.post(reverse("admin:library_librarydocument_add"), {"original_file": upload, "title": ""})

    assert response.status_code == 200
    assert "This Word document unpacks to too much data to read." in response.content.decode()
    assert time.perf_counter() - started < 15
    assert not LibraryDocument.objects.exists()


def test_staff_edit_in_the_admin_reindexes(staff_client):
    document = LibraryDocumentFactory(title="Draft", content="Old words.")

    response = staff_client.post(
        reverse("admin:library_librarydocument_change", args=[document.pk]),
        {"title": "Final", "content": "Fresh vocabulary."},
    )

    assert response.status_code == 302
    assert library_search(query="vocabulary", limit=5)[0].title == "Final"
    assert library_search(query="old", limit=5) == []
    assert staff_client.get(reverse("admin:library_librarydocument_changelist"), {"q": "Final"}).status_code == 200


def test_an_admin_link_from_before_the_library_was_an_app_leads_to_its_page_now(staff_client):
    document = LibraryDocumentFactory(title="SQLite WAL mode", content=WAL)

    listed = staff_client.get("/admin/agents/librarydocument/", {"q": "WAL"})
    changed = staff_client.get(f"/admin/agents/librarydocument/{document.pk}/change/", follow=True)

    assert (
        listed.status_code == 301
        and listed["Location"] == reverse("admin:library_librarydocument_changelist") + "?q=WAL"
    )
    assert changed.redirect_chain == [(reverse("admin:library_librarydocument_change", args=[document.pk]), 301)]
    assert changed.status_code == 200 and "SQLite WAL mode" in changed.content.decode()


def test_non_staff_get_no_admin(client, user):
    client.force_login(user)

    response = client.get(reverse("admin:library_librarydocument_add"))

    assert response.status_code == 302
    assert response.url.startswith(reverse("admin:login"))


# --- Samples -----------------------------------------------------------------------


def test_library_samples_loads_once(capsys):
    call_command("library_samples")
    titles = set(LibraryDocument.objects.values_list("title", flat=True))
    first_output = capsys.readouterr().out

    call_command("library_samples")
    second_output = capsys.readouterr().out

    assert {"Solid-state batteries", "SQLite WAL mode", "Retrieval-augmented generation (RAG)"} <= titles
    assert LibraryDocument.objects.count() == len(titles)
    assert first_output.count("Added ") == len(titles)
    assert second_output.count("Already in the library: ") == len(titles)
    assert (
        library_search(query="What limits concurrent writers in SQLite WAL mode?", limit=3)[0].title
        == "SQLite WAL mode"
    )
    assert (
        library_search(query="Why are solid-state batteries hard to make?", limit=3)[0].title == "Solid-state batteries"
    )


HEAT_PUMPS_ZH = "空气源热泵在寒冷气候中的性能。热泵的效率用COP衡量。"


@pytest.fixture
def chinese_library(user, library):
    return {
        **library,
        "heat_pumps": library_document_create(user=user, title="热泵", content=HEAT_PUMPS_ZH),
        "storage": library_document_create(
            user=user, title="家用储能", content="家用储能电池的寿命约为十年，循环次数决定成本。"
        ),
    }


@pytest.mark.parametrize(
    "query", ["COP", "热泵的效率", "寒冷气候中的性能", "效率", "COP衡量", "热泵在寒冷气候中的效率如何？"]
)
def test_chinese_words_and_questions_find_their_document(chinese_library, query):
    assert [hit.title for hit in library_search(query=query, limit=5)] == ["热泵"]


def test_a_chinese_question_worded_otherwise_still_finds_its_document(chinese_library):
    assert [hit.title for hit in library_search(query="寒冷地区热泵效率怎么样？", limit=5)] == ["热泵"]
    assert [hit.title for hit in library_search(query="储能电池能用多少年", limit=5)] == ["家用储能"]


def test_a_chinese_question_the_library_does_not_cover_finds_nothing(chinese_library):
    # 的, 是 and 如何 are particles; 光合作用 shares no pair of characters with any document.
    assert library_search(query="光合作用的原理是什么？", limit=5) == []
    assert library_search(query="如何", limit=5) == []


def test_a_chinese_snippet_marks_the_question_words_without_spaces_between_characters(chinese_library):
    (hit,) = library_search(query="热泵的效率", limit=5)

    assert "**热泵**的**效率**用COP衡量" in hit.snippet
    assert " " not in hit.snippet


# --- Relevance cut-off ---------------------------------------------------------------


@pytest.fixture
def samples():
    call_command("library_samples", verbosity=0)


@pytest.mark.parametrize(
    ("query", "title"),
    [
        ("How does SQLite WAL mode let readers and a writer work at once?", "SQLite WAL mode"),
        # Only "heat" and "pumps" of six words match, but both are the title.
        ("What are the benefits of heat pumps compared to gas boilers?", "Heat pumps"),
        ("How does RAG reduce hallucination?", "Retrieval-augmented generation (RAG)"),
        ("electrolytes", "Solid-state batteries"),
    ],
)
def test_a_question_the_library_covers_finds_its_document_alone(samples, query, title):
    assert {hit.title for hit in library_search(query=query, limit=5)} == {title}


@pytest.mark.parametrize(
    "query",
    [
        # "work" is in the heat pump and SQLite documents: one word of two.
        "How does photosynthesis work?",
        # "write" and "application" are in the SQLite document: two words of five.
        "How do I write a cover letter for a job application?",
        # "training" and "system" are in the RAG document: two words of four.
        "How do vaccines train the immune system?",
        # Nothing but stop words: every document has them.
        "What is it and how does it do that?",
    ],
)
def test_a_question_the_library_does_not_cover_finds_nothing(samples, query):
    assert library_search(query=query, limit=5) == []


def test_a_title_word_counts_double(library):
    # "sqlite" is in one title: two points, more than half of "sqlite pragma busy".
    assert [hit.title for hit in library_search(query="sqlite pragma busy", limit=5)] == ["SQLite WAL mode"]
    # "checkpoint" and "pages" are only in its text: two points, not more than half of four words.
    assert library_search(query="checkpoint pages vacuum fsync", limit=5) == []
    assert [hit.title for hit in library_search(query="checkpoint pages vacuum", limit=5)] == ["SQLite WAL mode"]


# --- Passages ------------------------------------------------------------------------------


def _sections(topic: str, facts: dict[str, str], filler: str) -> str:
    """A long markdown document: a section per fact, each padded with text
    that shares the document's vocabulary, as a real report's sections do."""
    return f"# {topic}\n\n" + "\n\n".join(
        f"## {heading}\n\n{filler * 20}\n\n{fact}\n\n{filler * 20}" for heading, fact in facts.items()
    )


@pytest.fixture
def long_reports(user):
    english = _sections(
        "Heat pump field trial",
        {
            f"Site {n}": f"At site {n} the {word} pump reached a seasonal COP of {n}.{n}."
            for n, word in enumerate(["ground", "air", "water", "hybrid", "exhaust", "solar", "geothermal"], start=1)
        },
        "The trial measured heat pumps in ordinary homes through the winter. ",
    )
    chinese = _sections(
        "储能电站运行报告",
        {
            "电池寿命": "磷酸铁锂电池循环六千次后容量仍保持百分之八十。",
            "消防": "每个舱室配备全氟己酮灭火装置和可燃气体探测器。",
            "收益": "峰谷价差套利使项目内部收益率达到百分之七。",
        },
        "储能电站的运行数据按月记录，覆盖充放电和温度。",
    )
    return {
        "english": library_document_create(user=user, title="Heat pump field trial", content=english),
        "chinese": library_document_create(user=user, title="储能电站运行报告", content=chinese),
    }


@pytest.mark.parametrize(
    ("query", "document", "heading", "words"),
    [
        ("Which site had an exhaust pump?", "english", "Heat pump field trial › Site 5", "exhaust"),
        ("seasonal COP of the geothermal pump", "english", "Heat pump field trial › Site 7", "geothermal"),
        ("储能电站用什么灭火装置？", "chinese", "储能电站运行报告 › 消防", "灭火"),
        ("储能电站电池循环多少次", "chinese", "储能电站运行报告 › 电池寿命", "循环"),
    ],
)
def test_a_question_finds_the_passage_that_answers_it_in_a_long_document(long_reports, query, document, heading, words):
    best, *others = library_search(query=query, limit=5)

    passage = long_reports[document].passages.get(number=library_url_passage(best.url))
    assert best.url.startswith(f"{long_reports[document].url}#")
    assert (best.heading, passage.heading) == (heading, heading)
    assert words in passage.text and "**" in best.snippet
    assert len(long_reports[document].content) > 5 * len(passage.text)
    # A few other passages of the same document at most.
    assert len(others) < 3


def test_a_documents_passages_follow_its_edits_and_go_with_it(long_reports):
    document = long_reports["english"]
    numbers = list(document.passages.values_list("number", flat=True))
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 7

    document.title = "Heat pump trial, final"
    document.content = "# Results\n\nEvery pump beat the boiler it replaced."
    document.save()

    assert [(p.number, p.title, p.heading, p.text) for p in document.passages.all()] == [
        (1, "Heat pump trial, final", "Results", "Every pump beat the boiler it replaced.")
    ]
    document.delete()
    assert not LibraryPassage.objects.filter(document_id=long_reports["english"].pk).exists()
    assert LibraryPassage.objects.filter(document=long_reports["chinese"]).count() == 6


def test_the_library_page_lists_a_document_once_with_its_best_passage(client, user, long_reports):
    client.force_login(user)

    page = client.get(reverse("library"), {"q": "geothermal pump seasonal COP"}).content.decode()

    assert page.count(f'href="{reverse("library-document", args=[long_reports["english"].pk])}?passage=') == 1
    assert "<mark>geothermal</mark>" in page


def test_a_hit_is_read_with_the_passages_around_it(user, long_reports):
    document = long_reports["chinese"]
    (hit,) = library_search(query="储能电站用什么灭火装置？", limit=1)

    fetched = web_fetch(ToolContext(artifacts=None, user=user), url=hit.url)

    assert fetched.success
    # Each section is filler, the fact, filler: two passages.
    assert document.passages.count() == 6
    assert 'passages="2-4 of 6"' in fetched.content
    assert '<passage number="3" section="储能电站运行报告 › 消防">' in fetched.content
    assert fetched.content.count("<passage ") == 3 and "全氟己酮" in fetched.content
    # Not the whole document: the sections before and after are not read.
    assert "六千次" not in fetched.content and "峰谷" not in fetched.content
    assert fetched.output["source"]["url"] == hit.url == f"{document.url}#3"

    english = long_reports["english"]
    middle = library_document_fetch(url=f"{english.url}#4", user=user)
    assert 'passages="3-5 of' in middle.content and "Site 1" not in middle.content


@pytest.mark.parametrize("number", [0, 99])
def test_a_passage_the_document_does_not_have_is_a_clear_error(user, long_reports, number):
    url = f"{long_reports['chinese'].url}#{number}"

    result = library_document_fetch(url=url, user=user)

    assert not result.success
    assert f"has 6 passages; #{number} is none of them" in result.content


def test_another_users_group_passage_is_no_passage(team_library):
    url = f"{team_library['limited'].url}#1"

    assert not library_document_fetch(url=url, user=team_library["outsider"]).success
    assert library_document_fetch(url=url, user=team_library["member"]).success


# --- Documents limited to a group ----------------------------------------------------------


@pytest.fixture
def team_library(user, other_user):
    """A document of the 热泵组 group's, added by `user`, who is in it; `other_user` is not."""
    group = Group.objects.create(name="热泵组")
    member = UserFactory()
    member.groups.add(group)
    user.groups.add(group)
    return {
        "group": group,
        "member": member,
        "outsider": other_user,
        "uploader": user,
        "limited": library_document_create(user=user, title="热泵内部手册", content=HEAT_PUMPS_ZH, group=group),
        "public": library_document_create(user=user, title="SQLite WAL mode", content=WAL),
    }


@pytest.mark.parametrize("query", ["热泵的效率", "COP"])
def test_a_group_document_is_found_by_its_members_and_uploader_alone(team_library, query):
    def titles(user):
        return [hit.title for hit in library_search(query=query, limit=5, user=user)]

    assert titles(team_library["member"]) == ["热泵内部手册"]
    assert titles(team_library["uploader"]) == ["热泵内部手册"]
    assert titles(team_library["outsider"]) == []
    # No user at all sees only what no group limits.
    assert titles(None) == []
    assert [hit.title for hit in library_search(query="WAL", limit=5, user=team_library["outsider"])] == [
        "SQLite WAL mode"
    ]


def test_a_group_document_is_no_document_to_an_outsiders_fetch(team_library):
    url = team_library["limited"].url

    refused = library_document_fetch(url=url, user=team_library["outsider"])
    fetched = library_document_fetch(url=url, user=team_library["member"])

    assert not refused.success and f"There is no library document {url}" in refused.content
    assert "热泵内部手册" not in refused.content
    assert fetched.success and "寒冷气候" in fetched.content


def test_the_agents_search_and_fetch_see_what_the_conversations_owner_may(team_library):
    def context(user):
        return ToolContext(artifacts=None, user=user)

    url = team_library["limited"].url
    outsider, member = context(team_library["outsider"]), context(team_library["member"])

    assert web_search(outsider, query="热泵的效率").metadata["results"] == 0
    assert web_search(member, query="热泵的效率").output["sources"][0]["url"] == f"{url}#1"
    assert not web_fetch(outsider, url=url).success
    assert web_fetch(member, url=url).output["source"]["title"] == "热泵内部手册"


def test_a_new_conversations_examples_name_only_documents_the_user_may_read(team_library):
    assert library_titles(language="zh-hans", user=team_library["outsider"]).titles == ["SQLite WAL mode"]
    assert library_titles(language="zh-hans", user=team_library["member"]).titles == ["热泵内部手册", "SQLite WAL mode"]


# --- Many files at once ----------------------------------------------------------------------


def _zip(files: dict[str, bytes]) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return SimpleUploadedFile("team-docs.zip", buffer.getvalue(), content_type="application/zip")


def _word(heading: str, text: str) -> bytes:
    word = docx.Document()
    word.add_heading(heading, level=1)
    word.add_paragraph(text)
    buffer = io.BytesIO()
    word.save(buffer)
    return buffer.getvalue()


def _read_all(added) -> dict[str, LibraryDocument]:
    for document in added.documents:
        library_document_read(document_id=document.pk)
    return {
        document.title: document for document in LibraryDocument.objects.filter(pk__in=[d.pk for d in added.documents])
    }


def test_a_zip_and_files_are_queued_then_read_each_indexed_or_failed_with_why(
    user, settings, django_capture_on_commit_callbacks
):
    settings.ARTIFACT_UPLOAD_MAX_BYTES = 200_000
    upload = _zip(
        {
            "notes/热泵笔记.md": "# 热泵笔记\n\n寒冷地区的热泵效率会下降，需要除霜。".encode(),
            "cells.docx": _word("Perovskite cells", "Perovskite solar cells degrade in humid air."),
            "tides.pdf": pdf_bytes(["Mean tidal range at Den Helder is 1.4 m."], title="Tide report"),
            "broken.pdf": b"%PDF-1.7 this is no PDF at all",
            "photo.png": b"\x89PNG\r\n\x1a\n",
            "../../escape.md": b"# Escape\n\nA name that climbs out of the folder.",
            "__MACOSX/._热泵笔记.md": b"resource fork",
            ".DS_Store": b"\x00\x00",
            "empty/": b"",
            # What a zip bomb does: small packed, far past the limit unpacked.
            "bomb.txt": b"0" * 5_000_000,
        }
    )
    loose = SimpleUploadedFile("zeolites.txt", b"Plain words about zeolites.")

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        added = library_documents_queue(user=user, uploaded_files=[upload, loose])

    assert [document.title for document in added.documents] == [
        "热泵笔记.md",
        "cells.docx",
        "tides.pdf",
        "broken.pdf",
        "escape.md",
        "zeolites.txt",
    ]
    assert added.skipped == [
        "bomb.txt: This file is larger than the upload limit of 195.3\xa0KB.",
        "photo.png: not a kind of file the library reads (markdown, text, Word or PDF)",
    ]
    assert all(d.status == LibraryDocument.Status.QUEUED and d.content == "" for d in added.documents)
    assert len(callbacks) == len(added.documents)
    assert OrmQ.objects.count() == len(added.documents)
    assert all(
        d.original_file.name.startswith("library/") and ".." not in d.original_file.name for d in added.documents
    )
    # Nothing to find or read until a worker has read it.
    assert library_search(query="热泵效率", limit=5) == []
    assert "still being read" in library_document_fetch(url=added.documents[0].url, user=user).content

    documents = _read_all(added)

    failed = documents.pop("broken.pdf")
    assert failed.status == LibraryDocument.Status.FAILED and failed.error.startswith("Could not read")
    assert {d.status for d in documents.values()} == {LibraryDocument.Status.INDEXED}
    assert documents["cells.docx"].content == "# Perovskite cells\n\nPerovskite solar cells degrade in humid air."
    assert "1.4 m" in documents["tides.pdf"].content
    assert library_search(query="热泵效率", limit=5)[0].url == f"{documents['热泵笔记.md'].url}#1"
    assert "humid air" in library_document_fetch(url=documents["cells.docx"].url, user=user).content
    assert "could not be read" in library_document_fetch(url=failed.url, user=user).content


def test_past_the_limits_files_are_skipped_and_named(user, settings):
    settings.LIBRARY_BULK_MAX_FILES = 2
    settings.LIBRARY_BULK_MAX_BYTES = 60
    files = [SimpleUploadedFile(f"{n}.md", f"# Note {n}\n\n{'x' * 20}".encode()) for n in range(4)]
    not_a_zip = SimpleUploadedFile("archive.zip", b"PK no zip here")

    added = library_documents_queue(user=user, uploaded_files=[*files, not_a_zip])

    assert [document.title for document in added.documents] == ["0.md", "1.md"]
    assert added.skipped == [
        "archive.zip: not a .zip that can be read",
        "2.md: more than 2 files at once",
        "3.md: more than 2 files at once",
    ]
    settings.LIBRARY_BULK_MAX_FILES = 10
    added = library_documents_queue(user=user, uploaded_files=files)
    assert added.skipped == ["2.md: more than 60\xa0bytes in all", "3.md: more than 60\xa0bytes in all"]


def test_a_failed_document_is_read_again_by_whoever_may_remove_it(user, other_user, django_capture_on_commit_callbacks):
    added = library_documents_queue(
        user=user, uploaded_files=[SimpleUploadedFile("a.pdf", b"not a pdf"), SimpleUploadedFile("b.md", b"# B")]
    )
    failed = _read_all(added)["a.pdf"]
    assert failed.status == LibraryDocument.Status.FAILED

    assert library_document_retry(user=other_user, document_id=failed.pk) is None
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        retried = library_document_retry(user=user, document_id=failed.pk)
    assert (retried.status, retried.error, len(callbacks)) == (LibraryDocument.Status.QUEUED, "", 1)
    # Its file fixed behind the portal's back (an administrator), the next read indexes it.
    retried.original_file.save("a.md", SimpleUploadedFile("a.md", b"# A\n\nFixed."), save=True)
    assert library_document_read(document_id=failed.pk).status == LibraryDocument.Status.INDEXED
    # A document read already, or removed meanwhile, is left as it is.
    assert library_document_read(document_id=failed.pk) is None
    removed = added.documents[1]
    LibraryDocument.objects.filter(pk=removed.pk).delete()
    assert library_document_read(document_id=removed.pk) is None
    assert not LibraryDocument.objects.filter(pk=removed.pk).exists()


def test_a_pdfs_passages_know_their_pages_and_a_hit_says_it(user, signed_in):
    pages = [
        "Tidal ranges of the North Sea coast. " * 10,
        "",
        "At Den Helder the mean tidal range is 1.4 metres, measured over nineteen years.",
    ]
    document = library_document_create(
        user=user, title="Tide report", uploaded_file=SimpleUploadedFile("tides.pdf", pdf_bytes(pages))
    )

    assert [(passage.page, passage.text.strip()[:12]) for passage in document.passages.all()] == [
        (1, "Tidal ranges"),
        (3, "At Den Helde"),
    ]
    (hit,) = library_search(query="Den Helder tidal range", limit=5, per_document=1)
    assert hit.page == 3
    sources = web_search(ToolContext(artifacts=None, user=user), query="Den Helder tidal range").output["sources"]
    assert sources[0]["page"] == 3
    fetched = library_document_fetch(url=document.url, user=user)
    assert "\f" not in fetched.content and "1.4 metres" in fetched.content
    page = lxml.html.fromstring(signed_in.get(reverse("library-document", args=[document.pk]), {"at": 2}).content)
    assert page.xpath("//p[contains(@class, 'library-passage')]")[0].text_content() == "Passage 2 of 2 · page 3"


def test_a_zip_that_unpacks_to_more_than_the_whole_may_hold_is_read_no_further(user, settings):
    settings.LIBRARY_BULK_MAX_BYTES = 250
    settings.LIBRARY_BULK_MAX_FILES = 3
    upload = _zip({f"{n}.md": f"# Note {n}\n\n".encode() + b"x" * 90 for n in range(6)} | {"photo.png": b"\x89PNG"})

    added = library_documents_queue(user=user, uploaded_files=[upload])

    assert [document.title for document in added.documents] == ["0.md", "1.md"]
    assert added.skipped == [
        "2.md: more than 250\xa0bytes in all",
        "3.md: more than 250\xa0bytes in all",
        "4.md: more than 250\xa0bytes in all",
        "5.md: more than 250\xa0bytes in all",
        "photo.png: not a kind of file the library reads (markdown, text, Word or PDF)",
    ]


def test_the_sweep_queues_again_a_document_whose_reading_was_lost_once(user, django_capture_on_commit_callbacks):
    added = library_documents_queue(
        user=user, uploaded_files=[SimpleUploadedFile("lost.md", b"# Lost"), SimpleUploadedFile("fresh.md", b"# Fresh")]
    )
    lost, _fresh = added.documents
    LibraryDocument.objects.filter(pk=lost.pk).update(updated_at=timezone.now() - timedelta(minutes=11))
    OrmQ.objects.all().delete()

    with django_capture_on_commit_callbacks(execute=True):
        first, again = library_sweep(), library_sweep()

    assert (first, again) == (1, 0)
    assert [task.task["args"] for task in OrmQ.objects.all()] == [(lost.pk,)]
    assert Schedule.objects.filter(name=SWEEP_SCHEDULE, func="library.services.library_sweep").exists()
    assert library_document_read(document_id=lost.pk).status == LibraryDocument.Status.INDEXED
