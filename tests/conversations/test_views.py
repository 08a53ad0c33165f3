import gzip
import io
import re
import uuid
import zipfile
from datetime import timedelta
from html import unescape
from urllib.parse import parse_qs, urlsplit

import docx
import lxml.html
import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agents.models import Run
from artifactflow import markdown as markdown_module
from artifacts.branches import branch_at
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact, ArtifactSession
from conversations import lifecycle, selectors, services
from conversations.models import Conversation, ConversationShare, Message
from tests.artifacts.test_views import download_name
from tests.conversations.test_selectors import expected_label
from tests.factories import PASSWORD, ConversationFactory, ConversationShareFactory, MessageFactory, RunFactory

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def _urls(conversation):
    return [
        ("get", reverse("conversation-detail", args=[conversation.pk])),
        ("post", reverse("message-create", args=[conversation.pk])),
    ]


def test_pages_need_a_signed_in_user(client):
    response = client.get(reverse("chat"))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_an_htmx_request_without_a_session_redirects_the_whole_page(client):
    conversation = ConversationFactory()
    response = client.post(reverse("message-create", args=[conversation.pk]), {"content": "hi"}, **HTMX)
    assert response.headers["HX-Redirect"].startswith(reverse("login"))


def test_signing_in_again_after_a_send_leads_back_to_the_page_it_was_sent_from(client):
    """Not to the POST's address, which a GET after signing in would refuse."""
    conversation = ConversationFactory()
    page = conversation.get_absolute_url()
    url = reverse("message-create", args=[conversation.pk])

    response = client.post(url, {"content": "我的草稿"}, HTTP_HX_CURRENT_URL=f"http://testserver{page}", **HTMX)

    assert _login_next(response) == page
    # A page of another site is not where signing in leads.
    response = client.post(url, {"content": "hi"}, HTTP_HX_CURRENT_URL="https://evil.example/x", **HTMX)
    assert _login_next(response) == url


def _login_next(response) -> str:
    """Where the sign-in page an HTMX response sends to leads back to."""
    redirect = urlsplit(response.headers["HX-Redirect"])
    assert redirect.path == reverse("login")
    return parse_qs(redirect.query)["next"][0]


def test_another_users_conversation_is_a_404_on_every_url(signed_in, other_user):
    theirs = ConversationFactory(owner=other_user)
    MessageFactory(conversation=theirs)
    for method, url in _urls(theirs):
        response = getattr(signed_in, method)(url, {"content": "let me in"})
        assert response.status_code == 404, url
    assert theirs.messages.count() == 1


def test_the_chat_page_lists_only_my_conversations(signed_in, user, other_user):
    ConversationFactory(owner=user, title="Mine")
    ConversationFactory(owner=other_user, title="Theirs")
    page = signed_in.get(reverse("chat")).content.decode()
    assert "Mine" in page
    assert "Theirs" not in page


def test_asking_starts_a_conversation_and_sends_htmx_to_its_page(signed_in, user):
    response = signed_in.post(reverse("conversation-create"), {"content": "What is WAL?"}, **HTMX)

    conversation = Conversation.objects.get(owner=user)
    assert response.headers["HX-Redirect"] == conversation.get_absolute_url()
    assert conversation.active_branch.runs.get().status == Run.Status.QUEUED


def test_asking_without_htmx_redirects(signed_in, user):
    response = signed_in.post(reverse("conversation-create"), {"content": "What is WAL?"})
    assert response.status_code == 302
    assert response.url == Conversation.objects.get(owner=user).get_absolute_url()


def test_an_empty_question_shows_an_error_and_stores_nothing(signed_in):
    response = signed_in.post(reverse("conversation-create"), {"content": "   "}, **HTMX)
    assert response.status_code == 422
    assert response.headers["HX-Retarget"] == "#composer-error"
    assert "Write a message first." in response.content.decode()
    assert not Conversation.objects.exists()


def test_a_first_question_answers_with_the_thread_holding_it(signed_in, user):
    conversation = ConversationFactory(owner=user)
    response = signed_in.post(reverse("message-create", args=[conversation.pk]), {"content": "Next?"}, **HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="thread"' in html
    assert "Next?" in html
    assert 'data-status="queued"' in html


def test_while_a_turn_runs_the_composer_offers_stop_and_a_second_question_is_refused(signed_in, user):
    conversation = ConversationFactory(owner=user)
    posted = signed_in.post(
        reverse("message-create", args=[conversation.pk]), {"content": "First"}, **HTMX
    ).content.decode()
    run = Run.objects.get(message__conversation=conversation)

    # The thread comes with the composer's actions, swapped out of band: Stop for this turn.
    assert 'id="composer-actions"' in posted and 'hx-swap-oob="true"' in posted
    assert reverse("run-cancel", args=[run.pk]) in posted and ">Send</button>" not in posted
    second = signed_in.post(reverse("message-create", args=[conversation.pk]), {"content": "Second"}, **HTMX)
    assert second.status_code == 422 and "A turn is still running in this conversation" in second.content.decode()
    assert conversation.messages.count() == 1

    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    page = signed_in.get(conversation.get_absolute_url()).content.decode()
    assert ">Send</button>" in page and reverse("run-cancel", args=[run.pk]) not in page


def test_always_allowed_tools_show_under_the_thread_and_can_be_revoked(signed_in, user, other_user):
    from django.test import Client

    conversation = ConversationFactory(owner=user)
    root = MessageFactory(conversation=conversation, metadata={"allowed_tools": ["web_fetch", "web_search"]})
    leaf = MessageFactory(conversation=conversation, parent=root, metadata={"allowed_tools": ["web_fetch"]})
    other_branch = MessageFactory(conversation=conversation, metadata={"allowed_tools": ["web_fetch"]})
    conversation.active_branch = leaf
    conversation.save()
    url = reverse("allowed-tool-revoke", args=[conversation.pk])

    page = signed_in.get(conversation.get_absolute_url()).content.decode()
    assert "Always allowed on this branch" in page and 'value="web_fetch"' in page and 'value="web_search"' in page
    other = Client()
    other.force_login(other_user)
    assert other.post(url, {"tool": "web_fetch"}, **HTMX).status_code == 404
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post(url, {"tool": "web_fetch"}, **HTMX).status_code == 403

    revoked = signed_in.post(url, {"tool": "web_fetch"}, **HTMX).content.decode()

    assert 'value="web_fetch"' not in revoked and 'value="web_search"' in revoked
    assert "The next turn asks before web_fetch again" in revoked
    root.refresh_from_db(), leaf.refresh_from_db(), other_branch.refresh_from_db()
    assert root.metadata["allowed_tools"] == ["web_search"] and leaf.metadata["allowed_tools"] == []
    # Another branch keeps what it allows.
    assert other_branch.metadata["allowed_tools"] == ["web_fetch"]


def test_a_new_conversation_offers_questions_about_what_the_library_holds(signed_in):
    from tests.factories import LibraryDocumentFactory

    assert "The team library is empty" in signed_in.get(reverse("chat")).content.decode()
    LibraryDocumentFactory(title="Heat pumps in cold climates")

    page = signed_in.get(reverse("chat")).content.decode()

    assert "<strong>Heat pumps in cold climates</strong>" in page
    assert 'value="What does our library say about Heat pumps in cold climates? Summarise the key points."' in page
    assert "autofocus" in page


def test_a_reader_of_chinese_is_offered_questions_about_the_chinese_documents_first(signed_in):
    from tests.factories import LibraryDocumentFactory

    for title in ("Heat pumps", "SQLite WAL mode", "Solid-state batteries", "家用储能电池"):
        LibraryDocumentFactory(title=title)

    chinese = signed_in.get(reverse("chat"), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    english = signed_in.get(reverse("chat"), HTTP_ACCEPT_LANGUAGE="en").content.decode()

    examples = re.compile(r'<button type="submit" name="content" value="([^"]*)"')
    assert len(examples.findall(chinese)) == 3 and "家用储能电池" in examples.findall(chinese)[0]
    assert not any("家用储能电池" in example for example in examples.findall(english))


def test_a_new_conversation_names_six_titles_and_how_many_more_in_the_readers_language(signed_in):
    from tests.factories import LibraryDocumentFactory

    for title in ("空气源热泵", "分布式光伏", "Heat pumps", "家用储能电池", "RAG", "Solid-state batteries", "固态电池"):
        LibraryDocumentFactory(title=title)
    LibraryDocumentFactory(title="SQLite WAL mode")
    examples = re.compile(r'<button type="submit" name="content" value="[^"]*" class="secondary">([^<]*)</button>')

    english = signed_in.get(reverse("chat"), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    chinese = signed_in.get(reverse("chat"), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()

    assert "<strong>空气源热泵</strong>, <strong>分布式光伏</strong> and 2 more." in english
    assert examples.findall(english) == [
        "What does our library say about Heat pumps?",
        "What does our library say about RAG?",
        "What does our library say about Solid-state batteries?",
    ]
    assert "<strong>Heat pumps</strong>、<strong>RAG</strong>，以及另外 2 篇。" in chinese
    assert examples.findall(chinese) == [
        "我们的资料库关于空气源热泵说了什么？",
        "我们的资料库关于分布式光伏说了什么？",
        "我们的资料库关于家用储能电池说了什么？",
    ]
    LibraryDocumentFactory(title="One more")
    assert "and 3 more." in signed_in.get(reverse("chat"), HTTP_ACCEPT_LANGUAGE="en").content.decode()


def test_a_library_of_six_or_fewer_is_named_whole(signed_in):
    from tests.factories import LibraryDocumentFactory

    LibraryDocumentFactory(title="Heat pumps")

    page = signed_in.get(reverse("chat")).content.decode()

    assert "<strong>Heat pumps</strong>." in page and " more." not in page


def test_posting_with_a_parent_branches(signed_in, user):
    conversation = ConversationFactory(owner=user)
    root = MessageFactory(conversation=conversation, content="root")
    MessageFactory(conversation=conversation, parent=root, content="old child")

    signed_in.post(reverse("message-create", args=[conversation.pk]), {"content": "new child", "parent": root.pk})

    conversation.refresh_from_db()
    assert conversation.active_branch.parent == root
    assert conversation.active_branch.content == "new child"


def test_posting_with_a_parent_of_another_conversation_is_a_404(signed_in, user):
    conversation = ConversationFactory(owner=user)
    foreign = MessageFactory()
    response = signed_in.post(reverse("message-create", args=[conversation.pk]), {"content": "x", "parent": foreign.pk})
    assert response.status_code == 404
    assert not conversation.messages.exists()


def test_the_thread_shows_the_active_branch_with_answers_as_sanitised_markdown(signed_in, user):
    conversation = ConversationFactory(owner=user)
    root = MessageFactory(conversation=conversation, content="root q")
    MessageFactory(conversation=conversation, parent=root, content="other branch q")
    leaf = MessageFactory(
        conversation=conversation,
        parent=root,
        content="leaf q",
        response="**bold** <script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1))",
    )
    RunFactory(message=leaf, status=Run.Status.COMPLETED)
    conversation.active_branch = leaf
    conversation.save()

    html = signed_in.get(conversation.get_absolute_url()).content.decode()

    assert "root q" in html and "leaf q" in html
    assert "other branch q" not in html
    assert "<strong>bold</strong>" in html
    assert "<script>alert" not in html
    assert "<img" not in html
    assert 'href="javascript:' not in html


def test_a_post_needs_a_csrf_token(user):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post(reverse("conversation-create"), {"content": "hi"})
    assert response.status_code == 403


def _page_for(client, message):
    conversation = message.conversation
    conversation.active_branch = message
    conversation.save()
    return client.get(conversation.get_absolute_url()).content.decode()


@pytest.mark.events_by_hand
def test_a_reload_mid_turn_shows_the_text_streamed_so_far(signed_in, user):
    from agents.models import RunEvent

    run = RunFactory(message=MessageFactory(conversation=ConversationFactory(owner=user)), status=Run.Status.RUNNING)
    for seq, (type, data) in enumerate(
        [
            ("metadata", {"model": "m", "demo": False}),
            ("agent_start", {}),
            ("llm_chunk", {"content": "Half of "}),
            ("llm_chunk", {"content": "an answer"}),
        ],
        start=1,
    ):
        RunEvent.objects.create(run=run, seq=seq, type=type, agent="lead_agent", data=data)

    html = _page_for(signed_in, run.message)

    assert "Half of an answer" in html
    assert 'data-status="running"' in html
    assert "lead_agent · writing the answer…" in html


def test_a_failed_turn_shows_why(signed_in, user):
    run = RunFactory(
        message=MessageFactory(conversation=ConversationFactory(owner=user)),
        status=Run.Status.FAILED,
        error="The model service answered 500: overloaded",
    )
    html = _page_for(signed_in, run.message)
    assert 'role="alert">The model service answered 500: overloaded<' in html
    assert 'data-status="failed"' in html


def test_the_demo_model_is_labelled(signed_in, user):
    run = RunFactory(
        message=MessageFactory(conversation=ConversationFactory(owner=user), response="Demo says hi"),
        status=Run.Status.COMPLETED,
        model="demo",
    )
    assert "demo model</span>" in _page_for(signed_in, run.message)


def test_search_renders_the_matching_list_and_marks_the_open_conversation(signed_in, user, other_user):
    mine = ConversationFactory(owner=user, title="Heat pumps")
    ConversationFactory(owner=user, title="Batteries")
    ConversationFactory(owner=other_user, title="Heat pumps too")

    response = signed_in.get(reverse("conversation-search"), {"q": "heat", "current": str(mine.pk)}, **HTMX)

    page = response.content.decode()
    assert page.count('<li class="conversation-item"') == 1 and "Heat pumps" in page and 'aria-current="page"' in page
    empty = signed_in.get(reverse("conversation-search"), {"q": "nothing like it"}, **HTMX).content.decode()
    assert "No conversation matches “nothing like it”" in empty
    assert "Batteries" not in signed_in.get(reverse("chat"), {"q": "heat"}).content.decode()


def test_rename_updates_the_head_and_the_list(signed_in, user):
    conversation = ConversationFactory(owner=user, title="Old")

    response = signed_in.post(
        reverse("conversation-rename", args=[conversation.pk]), {"title": "New <b>name</b>"}, **HTMX
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert (
        '<h1 id="conversation-title" title="New &lt;b&gt;name&lt;/b&gt;">New &lt;b&gt;name&lt;/b&gt;</h1>' in page
        and 'id="conversation-items" hx-swap-oob="true"' in page
    )
    error = signed_in.post(reverse("conversation-rename", args=[conversation.pk]), {"title": " "}, **HTMX)
    assert error.status_code == 422 and "needs a title" in error.content.decode()
    conversation.refresh_from_db()
    assert conversation.title == "New <b>name</b>"
    # The model's proposal never replaces it (agents.titling).
    assert conversation.metadata["title_source"] == "user"


def test_another_users_conversation_is_the_404_page_with_the_top_bar_and_a_way_back(signed_in, other_user, settings):
    assert not settings.DEBUG  # as in production: Django's own debug page otherwise
    theirs = ConversationFactory(owner=other_user, title="Their secret plans")

    response = signed_in.get(theirs.get_absolute_url())
    missing = signed_in.get(reverse("conversation-detail", args=[uuid.uuid4()]))

    page = response.content.decode()
    assert response.status_code == 404 and response.templates[0].name == "404.html"
    assert '<header class="topbar">' in page and "does not exist, or it is not yours" in page
    assert f'<a href="{reverse("chat")}">Back to your conversations</a>' in page
    assert "Their secret plans" not in page
    assert missing.status_code == 404 and "does not exist, or it is not yours" in missing.content.decode()


def test_signed_out_the_404_page_offers_to_sign_in(client):
    # A URL that resolves to no view is a 404 before sign-in is asked for.
    response = client.get("/no/such/page/")

    assert response.status_code == 404
    assert f'<a href="{reverse("login")}">Sign in</a>' in response.content.decode()


def test_delete_redirects_to_the_start_and_another_users_is_a_404(signed_in, user, other_user):
    mine = ConversationFactory(owner=user)
    theirs = ConversationFactory(owner=other_user)

    assert signed_in.post(reverse("conversation-delete", args=[theirs.pk]), **HTMX).status_code == 404
    assert (
        signed_in.post(reverse("conversation-rename", args=[theirs.pk]), {"title": "mine"}, **HTMX).status_code == 404
    )
    response = signed_in.post(reverse("conversation-delete", args=[mine.pk]), **HTMX)

    assert response.headers["HX-Redirect"] == reverse("chat")
    assert list(Conversation.objects.all()) == [theirs]


def test_a_delete_refused_for_an_active_turn_says_why_with_and_without_htmx(signed_in, user, other_user):
    mine = ConversationFactory(owner=user, title="Mine")
    RunFactory(message=MessageFactory(conversation=mine), status=Run.Status.WAITING_PERMISSION)
    theirs = ConversationFactory(owner=other_user)
    RunFactory(message=MessageFactory(conversation=theirs), status=Run.Status.RUNNING)
    url = reverse("conversation-delete", args=[mine.pk])

    fragment = signed_in.post(url, **HTMX)
    page = signed_in.post(url)

    reason = "A turn is still in progress here. Stop it, and delete the conversation once it has ended."
    assert fragment.status_code == 422 and "HX-Redirect" not in fragment.headers
    assert fragment.content.decode().lstrip().startswith('<header id="conversation-head"')
    assert f'<p class="error" role="alert">{reason}</p>' in fragment.content.decode()
    assert page.status_code == 422 and reason in page.content.decode() and "Mine" in page.content.decode()
    assert signed_in.post(reverse("conversation-delete", args=[theirs.pk]), **HTMX).status_code == 404
    assert Conversation.objects.count() == 2


def test_the_thread_offers_a_switcher_and_switching_shows_the_other_branch(signed_in, user):
    conversation = ConversationFactory(owner=user)
    first = MessageFactory(conversation=conversation, content="First try", response="Answer one")
    second = MessageFactory(conversation=conversation, content="Second try", response="Answer two")
    conversation.active_branch = second
    conversation.save()

    page = signed_in.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    assert "2/2" in page and f'name="message" value="{first.pk}"' in page

    response = signed_in.post(reverse("branch-switch", args=[conversation.pk]), {"message": first.pk}, **HTMX)
    thread = response.content.decode()
    assert "First try" in thread and "Second try" not in thread and "1/2" in thread
    foreign = MessageFactory()
    assert signed_in.post(reverse("branch-switch", args=[conversation.pk]), {"message": foreign.pk}).status_code == 404


def test_a_failed_turn_offers_retry_which_queues_a_new_run(signed_in, user):
    conversation = ConversationFactory(owner=user)
    message = MessageFactory(conversation=conversation)
    conversation.active_branch = message
    conversation.save()
    run = RunFactory(message=message, status=Run.Status.FAILED, error="The model answered 500.")

    page = signed_in.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()
    assert reverse("run-retry", args=[run.pk]) in page

    response = signed_in.post(reverse("run-retry", args=[run.pk]), **HTMX)
    assert response.status_code == 200 and 'data-status="queued"' in response.content.decode()
    assert message.runs.count() == 2


def _conversations(user, count: int, *, step: timedelta = timedelta(seconds=1)) -> list[Conversation]:
    """`count` conversations `step` apart from now back, newest first."""
    now = timezone.now()
    conversations = Conversation.objects.bulk_create(Conversation(owner=user, title=f"c{i}") for i in range(count))
    ArtifactSession.objects.bulk_create(ArtifactSession(conversation=c) for c in conversations)
    for i, conversation in enumerate(conversations):
        conversation.updated_at = now - i * step
    Conversation.objects.bulk_update(conversations, ["updated_at"])
    return conversations


_ITEM = re.compile(r'<li class="conversation-item" data-conversation="[0-9a-f-]+"><a href="/c/([0-9a-f-]+)/"')
_MORE = re.compile(r'<li class="more"><a href="([^"]+)" hx-get="([^"]+)" hx-target="closest li">Load more</a></li>')


def _items(html: str) -> list[str]:
    return _ITEM.findall(html)


def _more(html: str) -> tuple[str, str] | None:
    """The no-JS and the HTMX URL of the list's "Load more"."""
    found = _MORE.search(html)
    return (unescape(found[1]), unescape(found[2])) if found else None


_SECTION = re.compile(
    r'<h2 id="conversation-group-(?P<heading>[\w-]+)-heading">(?P<label>[^<]*)</h2>'
    r'|<ul hx-swap-oob="beforeend:#conversation-group-(?P<appended>[\w-]+)">'
    r'|<li class="conversation-item" data-conversation="[0-9a-f-]+"><a href="/c/(?P<item>[0-9a-f-]+)/"'
)


def _groups(html: str) -> list[tuple[str, str | None, list[str]]]:
    """The date groups of a list or page of it, in order: (key, heading,
    conversation ids), the heading None where htmx appends the conversations
    to the group of that key already on screen."""
    groups = []
    for found in _SECTION.finditer(html):
        if found["heading"]:
            groups.append((found["heading"], unescape(found["label"]), []))
        elif found["appended"]:
            groups.append((found["appended"], None, []))
        else:
            groups[-1][2].append(found["item"])
    return groups


@pytest.mark.parametrize("count", [10, 1000])
def test_the_chat_page_and_a_list_page_take_the_same_few_queries_however_many_conversations(
    signed_in, user, count, django_assert_max_num_queries
):
    conversations = _conversations(user, count)
    conversation = ConversationFactory(owner=user)
    before = selectors.conversation_list(user=user, limit=5).next_cursor
    # the session, the user, the list's page, its marks, what others shared with
    # the user (and on the first page the pinned ones; for a new conversation's
    # examples, the library's titles; the user's token budget, for the composer's notice;
    # the projects they may read, with their latest conversations when there are any)
    with django_assert_max_num_queries(4 + 5):
        chat = signed_in.get(reverse("chat")).content.decode()
    with django_assert_max_num_queries(4):
        more = signed_in.get(reverse("conversation-search"), {"before": before}, **HTMX).content.decode()
    # and the conversation, its thread, its artifact pane, its turn still running
    # (Stop or Send) and the budget beside it, the share panel's shares and groups, and the
    # sidebar's projects, those it can move to and its schedule
    with django_assert_max_num_queries(5 + 5 + 2 + 2 + 3):
        signed_in.get(conversation.get_absolute_url())
    assert len(_items(chat)) == min(count + 1, 50) and str(conversations[0].pk) in chat
    assert len(_items(more)) == min(count + 1 - 5, 50)


def test_load_more_appends_the_next_page_in_place_of_itself_until_the_last(signed_in, user):
    conversations = _conversations(user, 120)

    first = signed_in.get(reverse("chat")).content.decode()
    second = signed_in.get(_more(first)[1], **HTMX).content.decode()
    third = signed_in.get(_more(second)[1], **HTMX).content.decode()

    assert 'id="conversation-items"' not in second and "<nav" not in second
    assert [len(_items(page)) for page in (first, second, third)] == [50, 50, 20]
    assert _items(first) + _items(second) + _items(third) == [str(c.pk) for c in conversations]
    assert _more(third) is None and "No conversations yet" not in third


def test_a_thousand_conversations_load_under_date_headings_none_shown_twice_in_the_same_queries_a_page(
    signed_in, user, settings
):
    # A zone far from UTC, so a day here is not a day in UTC.
    settings.TIME_ZONE = "Pacific/Kiritimati"
    # Ten hours apart: today to more than a year back.
    conversations = _conversations(user, 1000, step=timedelta(hours=10))

    pages = [signed_in.get(reverse("chat")).content.decode()]
    queries = []
    while more := _more(pages[-1]):
        with CaptureQueriesContext(connection) as captured:
            pages.append(signed_in.get(more[1], **HTMX).content.decode())
        queries.append(len(captured))

    # the session, the user, the list's page, its marks: however deep the page
    assert len(pages) == 20 and queries == [4] * 19
    headings, order = {}, []
    for number, page in enumerate(pages):
        for position, (key, heading, ids) in enumerate(_groups(page)):
            if heading is None:
                # Only a page's first group continues one: the group the list on screen ends with.
                assert number and position == 0 and key == order[-1], (number, key)
                headings[key][1].extend(ids)
            else:
                assert key not in headings, f"{heading} shown twice"
                headings[key] = (heading, ids)
                order.append(key)
    today = timezone.localdate()
    by_id = {str(c.pk): c for c in conversations}
    assert [pk for key in order for pk in headings[key][1]] == list(by_id)
    for heading, ids in headings.values():
        assert {expected_label(by_id[pk].updated_at, today) for pk in ids} == {heading}
    labels = [headings[key][0] for key in order]
    assert labels[:4] == ["Today", "Yesterday", "Previous 7 days", "Previous 30 days"]
    assert len(set(labels)) == len(labels) >= 16


def test_search_results_keep_their_snippets_under_date_headings(signed_in, user):
    now = timezone.now()
    for age in (0, 3, 45):
        conversation = ConversationFactory(owner=user, title=f"{age} days")
        MessageFactory(conversation=conversation, content="How loud is a heat pump?")
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=now - timedelta(days=age))
    ConversationFactory(owner=user, title="Batteries")

    page = signed_in.get(reverse("conversation-search"), {"q": "loud"}, **HTMX).content.decode()

    headings = [heading for _, heading, _ in _groups(page)]
    assert headings == ["Today", "Previous 7 days", expected_label(now - timedelta(days=45), timezone.localdate())]
    # Postgres's headline ends with the space that joins question and answer.
    assert (
        len(re.findall(r"<small>How <mark>loud</mark> is a heat pump\? ?</small>", page)) == 3
        and "Batteries" not in page
    )


def test_without_javascript_load_more_is_a_link_to_the_page_with_the_next_list_page(signed_in, user):
    conversations = _conversations(user, 60)
    open_conversation = conversations[55]

    page = signed_in.get(open_conversation.get_absolute_url()).content.decode()
    href, htmx_url = _more(page)
    assert href.startswith(open_conversation.get_absolute_url() + "?before=")
    assert 'aria-current="page"' not in page  # it is on the next page
    assert f"current={open_conversation.pk}" in htmx_url

    next_page = signed_in.get(href).content.decode()
    assert '<nav id="conversation-list"' in next_page and _more(next_page) is None
    assert _items(next_page) == [str(c.pk) for c in conversations[50:]]
    assert f'<a href="/c/{open_conversation.pk}/" aria-current="page">' in next_page
    fragment = signed_in.get(htmx_url, **HTMX).content.decode()
    assert f'<a href="/c/{open_conversation.pk}/" aria-current="page">' in fragment
    # Both continue the group the first page ended in; only the page without
    # that first page above it shows the group's heading.
    ended_in = _groups(page)[-1][0]
    assert [(key, heading is None) for key, heading, _ in _groups(next_page)] == [(ended_in, False)]
    assert [(key, heading is None) for key, heading, _ in _groups(fragment)] == [(ended_in, True)]


def test_search_results_load_more_with_the_query(signed_in, user):
    _conversations(user, 10)
    for i in range(55):
        ConversationFactory(owner=user, title=f"Postgres {i}")

    first = signed_in.get(reverse("conversation-search"), {"q": "postgres"}, **HTMX).content.decode()
    href, htmx_url = _more(first)
    rest = signed_in.get(htmx_url, **HTMX).content.decode()

    assert "q=postgres" in href and "q=postgres" in htmx_url
    assert len(_items(first)) == 50 and len(_items(rest)) == 5 and "<mark>Postgres</mark>" in rest
    # All from the same moment: the rest joins the group the first page ended in.
    assert [(key, heading) for key, heading, _ in _groups(rest)] == [(_groups(first)[-1][0], None)]
    without_js = signed_in.get(reverse("conversation-search"), {"q": "postgres", "before": "x"})
    assert without_js.url == reverse("chat") + "?q=postgres&before=x"


def test_pages_are_gzipped_for_a_browser_that_accepts_it(signed_in, user):
    _conversations(user, 60)

    response = signed_in.get(reverse("chat"), HTTP_ACCEPT_ENCODING="gzip, deflate, br")

    assert response["Content-Encoding"] == "gzip" and "Accept-Encoding" in response["Vary"]
    assert len(_items(gzip.decompress(response.content).decode())) == 50
    assert "Content-Encoding" not in signed_in.get(reverse("chat"))


def test_with_redis_down_one_signs_in_and_sees_a_running_turn(disposable_redis, client, user, other_user):
    conversation = lifecycle.conversation_start(user=user, content="Still thinking?", enqueue=False)
    message = conversation.active_branch
    run = message.runs.get()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    branch = branch_at(session=conversation.artifact_session, message_id=message.pk)
    ArtifactManager(branch=branch, run_id=run.pk).create(artifact_id="draft", content="work in progress")
    theirs = ConversationFactory(owner=other_user)
    idle = ConversationFactory(owner=user)
    disposable_redis.kill()

    # Sessions and sign-in throttling (django-axes) keep to the database.
    signed = client.post(reverse("login"), {"username": user.username, "password": PASSWORD})
    page = client.get(reverse("conversation-detail", args=[conversation.pk]))
    posted = client.post(reverse("message-create", args=[idle.pk]), {"content": "And then?"}, **HTMX)

    assert signed.status_code == 302
    assert page.status_code == 200 and posted.status_code == 200 and "And then?" in posted.content.decode()
    html = page.content.decode()
    assert f'id="message-{message.pk}"' in html and "work in progress" not in html
    # The running turn's conversation offers Stop, not Send.
    assert reverse("run-cancel", args=[run.pk]) in html and ">Send</button>" not in html
    assert client.get(reverse("conversation-detail", args=[theirs.pk])).status_code == 404


def test_without_a_models_file_the_composer_offers_no_model(signed_in, user):
    conversation = ConversationFactory(owner=user)
    for url in (reverse("chat"), conversation.get_absolute_url()):
        assert 'name="model"' not in signed_in.get(url).content.decode()


def test_the_composer_offers_the_lead_models_and_sending_keeps_the_one_chosen(signed_in, user, lead_models):
    page = signed_in.get(reverse("chat")).content.decode()
    assert re.findall(r'<option value="(\w+)"( selected)?>([^<]*)</option>', page) == [
        ("deep", " selected", "深度思考 Deep · thinks before answering"),
        ("fast", "", "快速 Fast"),
    ]

    response = signed_in.post(reverse("conversation-create"), {"content": "热泵怎么样？", "model": "fast"}, **HTMX)
    conversation = Conversation.objects.get(owner=user)
    assert response.headers["HX-Redirect"] == conversation.get_absolute_url()
    assert conversation.lead_model == "fast" and conversation.active_branch.runs.get().lead_model == "fast"
    assert '<option value="fast" selected>' in signed_in.get(conversation.get_absolute_url()).content.decode()

    Run.objects.update(status=Run.Status.COMPLETED)
    posted = signed_in.post(
        reverse("message-create", args=[conversation.pk]), {"content": "深入一点", "model": "deep"}, **HTMX
    ).content.decode()
    conversation.refresh_from_db()
    assert conversation.lead_model == "deep"
    # The picker comes along, swapped out of band, so the composer's reset leaves the choice just made.
    assert '<div id="composer-model" class="composer-model" hx-swap-oob="true">' in posted
    assert '<option value="deep" selected>' in posted


def test_a_crafted_model_is_refused_and_the_draft_is_kept(signed_in, user, lead_models):
    conversation = ConversationFactory(owner=user)
    url = reverse("message-create", args=[conversation.pk])
    crafted = {"content": "我的草稿：用最贵的模型", "model": "gpt-5-huge"}

    fragment = signed_in.post(url, crafted, **HTMX)
    page = signed_in.post(url, crafted)
    new = signed_in.post(reverse("conversation-create"), crafted, **HTMX)

    said = "That model cannot be chosen here. Choose one from the list."
    # The refusal replaces only the error line: the composer and its text stay as they are.
    assert fragment.status_code == 422 and fragment.headers["HX-Retarget"] == "#composer-error"
    assert said in fragment.content.decode() and "composer-input" not in fragment.content.decode()
    # Without HTMX the page comes back with the draft in the composer.
    assert page.status_code == 422 and said in page.content.decode()
    assert ">我的草稿：用最贵的模型</textarea>" in page.content.decode()
    assert new.status_code == 422 and said in new.content.decode()
    conversation.refresh_from_db()
    assert conversation.lead_model == "" and not conversation.messages.exists()
    assert Conversation.objects.count() == 1


def test_another_users_conversation_is_a_404_with_a_model_too(signed_in, other_user, lead_models):
    theirs = ConversationFactory(owner=other_user)
    response = signed_in.post(reverse("message-create", args=[theirs.pk]), {"content": "hi", "model": "fast"}, **HTMX)
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.lead_model == "" and not theirs.messages.exists()


def test_an_answer_names_the_model_that_wrote_it(signed_in, user):
    message = MessageFactory(conversation=ConversationFactory(owner=user), response="热泵很高效。")
    RunFactory(message=message, status=Run.Status.COMPLETED, model="fast-model", model_label="快速 Fast")
    plain = MessageFactory(conversation=message.conversation, parent=message, response="没有标签。")
    RunFactory(message=plain, status=Run.Status.COMPLETED, model="gpt-4o-mini")
    Conversation.objects.filter(pk=message.conversation_id).update(active_branch=plain)

    page = signed_in.get(message.conversation.get_absolute_url()).content.decode()

    assert "没有标签。" in page and page.count('class="answer-model"') == 1
    assert '<p class="answer-model">Model: 快速 Fast</p>' in page


# A long thread comes in pages (agents.thread.thread_page).
ANSWER = "A heat pump moves heat rather than making it. " * 40


def _long_thread(user, turns: int) -> tuple[Conversation, list]:
    conversation = ConversationFactory(owner=user)
    parent, messages = None, []
    for number in range(1, turns + 1):
        parent = MessageFactory(
            conversation=conversation, parent=parent, content=f"Question {number:03}", response=ANSWER
        )
        RunFactory(message=parent, status=Run.Status.COMPLETED)
        messages.append(parent)
    conversation.refresh_from_db()
    return conversation, messages


def _questions(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'class="bubble user">Question (\d{3})', html)]


def _older_url(html: str) -> str | None:
    found = re.search(r'hx-get="([^"]*/turns/\?before=\d+)"', html)
    return unescape(found[1]) if found else None


def test_the_first_page_of_200_turns_is_the_size_of_the_first_page_of_40(
    signed_in, user, settings, django_assert_max_num_queries
):
    settings.THREAD_PAGE_TURNS = 20
    pages = {}
    for turns in (40, 200):
        conversation, _ = _long_thread(user, turns)
        # The session, the user, the conversation, the list (its pinned and its marks too), the thread (6),
        # the pane's and the composer's, what others shared with the user, the share panel's shares and groups,
        # and the sidebar's projects, those the conversation can move to and its schedule.
        with django_assert_max_num_queries(18 + 3 + 3):
            pages[turns] = signed_in.get(conversation.get_absolute_url()).content.decode()
        assert _questions(pages[turns]) == list(range(turns - 19, turns + 1))
        assert pages[turns].count('class="turn"') == 20
    # Only the numbers in the questions and ids differ.
    assert abs(len(pages[200]) - len(pages[40])) < 0.01 * len(pages[40])


def test_older_turns_load_a_page_at_a_time_back_to_the_first(signed_in, user, settings, django_assert_max_num_queries):
    settings.THREAD_PAGE_TURNS = 20
    conversation, _ = _long_thread(user, 45)
    html = signed_in.get(conversation.get_absolute_url()).content.decode()
    shown = _questions(html)
    while url := _older_url(html):
        # The session, the user, the conversation, the message, the path, the window and its fold (3).
        with django_assert_max_num_queries(9):
            response = signed_in.get(url, **HTMX)
        html = response.content.decode()
        assert 'id="thread"' not in html
        shown = _questions(html) + shown
    assert shown == list(range(1, 46))


def test_older_turns_of_another_users_conversation_or_message_are_a_404(signed_in, user, other_user):
    theirs, their_messages = _long_thread(other_user, 3)
    mine, _ = _long_thread(user, 3)
    url = reverse("thread-older", args=[theirs.pk])
    assert signed_in.get(url, {"before": their_messages[-1].pk}, **HTMX).status_code == 404
    url = reverse("thread-older", args=[mine.pk])
    for before in (their_messages[-1].pk, "", "9" * 25):
        assert signed_in.get(url, {"before": before}, **HTMX).status_code == 404


def test_older_turns_without_htmx_open_the_page_on_them(signed_in, user, settings):
    settings.THREAD_PAGE_TURNS = 20
    conversation, messages = _long_thread(user, 45)
    response = signed_in.get(reverse("thread-older", args=[conversation.pk]), {"before": messages[25].pk})
    first = messages[5].pk
    assert response.status_code == 302
    assert response["Location"] == f"{conversation.get_absolute_url()}?message={first}#message-{first}"
    assert _questions(signed_in.get(response["Location"]).content.decode()) == list(range(6, 46))


def test_a_link_to_turn_5_of_200_opens_a_page_holding_it(signed_in, user, settings):
    settings.THREAD_PAGE_TURNS = 20
    conversation, messages = _long_thread(user, 200)
    html = signed_in.get(conversation.get_absolute_url(), {"message": messages[4].pk}).content.decode()
    assert f'id="message-{messages[4].pk}"' in html
    assert _questions(html) == list(range(5, 201))
    assert _older_url(html).endswith(f"?before={messages[4].pk}")


def test_a_branch_switch_shows_the_newest_turns_of_the_other_branch(signed_in, user, settings):
    settings.THREAD_PAGE_TURNS = 20
    conversation, messages = _long_thread(user, 60)
    parent, others = messages[9], []
    for number in range(1, 31):
        parent = MessageFactory(conversation=conversation, parent=parent, content=f"Other {number:02}", shown=False)
        others.append(parent)

    response = signed_in.post(reverse("branch-switch", args=[conversation.pk]), {"message": others[0].pk}, **HTMX)
    html = response.content.decode()
    shown = re.findall(r'class="bubble user">(Question|Other) (\d+)', html)
    assert shown == [("Other", f"{n:02}") for n in range(11, 31)]
    assert _older_url(html).endswith(f"?before={others[10].pk}")


def test_sending_in_a_200_turn_thread_answers_with_the_new_turn_alone(
    signed_in, user, settings, django_assert_max_num_queries
):
    settings.THREAD_PAGE_TURNS = 20
    conversation, _ = _long_thread(user, 200)
    page = signed_in.get(conversation.get_absolute_url()).content.decode()
    response = signed_in.post(reverse("message-create", args=[conversation.pk]), {"content": "And now?"}, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert response["HX-Retarget"] == "#thread-turns" and response["HX-Reswap"] == "beforeend"
    assert html.count('class="turn"') == 1 and "And now?" in html and 'data-status="queued"' in html
    # The composer's actions swapped out of band, and nothing else: every id they name is on the page.
    assert 'id="composer-actions"' in html and "thread-notice" not in html
    assert len(html) < len(page) / 10


def test_sending_from_a_page_of_another_branch_than_the_conversations_answers_with_its_thread(signed_in, user):
    conversation, messages = _long_thread(user, 3)
    MessageFactory(conversation=conversation, parent=messages[0], content="Question 900")
    url = reverse("message-create", args=[conversation.pk])

    # This page still ends with the old branch's newest turn: another tab switched to the branch of "Question 900".
    response = signed_in.post(url, {"content": "And now?", "after": messages[-1].pk}, **HTMX)
    html = response.content.decode()
    assert 'id="thread"' in html and "HX-Retarget" not in response
    assert _questions(html) == [1, 900]
    assert "And now?" in html and 'id="artifact-pane"' in html

    Run.objects.filter(message__content="And now?").update(status=Run.Status.COMPLETED)
    sent = Conversation.objects.get(pk=conversation.pk).active_branch
    response = signed_in.post(url, {"content": "Then?", "after": sent.pk}, **HTMX)
    assert response["HX-Retarget"] == "#thread-turns"


def test_forking_opens_a_conversation_of_ones_own_that_links_back(signed_in, user, other_user):
    client = signed_in
    conversation = ConversationFactory(owner=user, title="热泵研究")
    first = MessageFactory(conversation=conversation, response="第一答。")
    MessageFactory(conversation=conversation, parent=first, response="第二答。")
    url = reverse("conversation-fork", args=[conversation.pk])

    response = signed_in.post(url, {"message": first.pk}, **HTMX)

    fork = Conversation.objects.exclude(pk=conversation.pk).get(owner=user)
    assert response["HX-Redirect"] == fork.get_absolute_url()
    page = signed_in.get(fork.get_absolute_url()).content.decode()
    assert "第一答。" in page and "第二答。" not in page
    origin = f"{conversation.get_absolute_url()}?message={first.pk}#message-{first.pk}"
    assert f'href="{origin}"' in page and "Continued from “热泵研究” by" in page

    # Someone who may not open the conversation cannot fork it, and learns nothing.
    client.force_login(other_user)
    assert client.post(url, {"message": first.pk}).status_code == 404
    assert not Conversation.objects.filter(owner=other_user).exists()
    # Once the origin is gone, the fork still says where it came from, without a link.
    conversation.delete()
    client.force_login(user)
    page = client.get(fork.get_absolute_url()).content.decode()
    assert "Continued from “热泵研究” by" in page and f'href="{origin}"' not in page


def test_forking_at_a_message_without_an_answer_says_why(signed_in, user):
    conversation = ConversationFactory(owner=user)
    message = MessageFactory(conversation=conversation)

    response = signed_in.post(reverse("conversation-fork", args=[conversation.pk]), {"message": message.pk})

    assert response.status_code == 422
    assert "This message has no answer yet" in response.content.decode()
    assert Conversation.objects.filter(owner=user).count() == 1


def _shared_conversation(owner):
    """A conversation of the owner's, with a finished turn and a report artifact."""
    conversation = ConversationFactory(owner=owner, title="热泵的冬季表现")
    message = MessageFactory(conversation=conversation, content="热泵冬天怎么工作？", response="它们**照常**工作。")
    RunFactory(message=message, status=Run.Status.COMPLETED)
    manager = ArtifactManager(branch=branch_at(session=conversation.artifact_session, message_id=message.pk))
    manager.create(artifact_id="report", content="# 报告\n\n第一版", title="报告")
    manager.flush_all()
    return conversation, message


def test_the_owner_shares_with_a_user_a_group_and_everyone_and_removes_each(signed_in, user, other_user):
    conversation, _ = _shared_conversation(user)
    team = Group.objects.create(name="研究组")
    user.groups.add(team)
    url = reverse("share-create", args=[conversation.pk])

    page = signed_in.get(conversation.get_absolute_url()).content.decode()
    assert 'id="share-panel"' in page and "研究组" in page and "Not shared with anyone." in page
    panel = signed_in.post(url, {"audience": "user", "username": other_user.username}, **HTMX).content.decode()
    signed_in.post(url, {"audience": "group", "group": team.pk}, **HTMX)
    panel = signed_in.post(url, {"audience": "everyone", "on": "1"}, **HTMX).content.decode()

    assert '<details id="share-panel" class="share" open>' in panel
    assert other_user.username in panel and "Group: 研究组" in panel
    assert "Everyone signed in can read it." in panel and "Stop sharing with everyone" in panel
    shares = {share.pk for share in selectors.conversation_shares(conversation=conversation)}
    for share in shares:
        response = signed_in.post(reverse("share-delete", args=[conversation.pk]), {"share": share}, **HTMX)
        assert response.status_code == 200
    assert selectors.conversation_shares(conversation=conversation) == []


def test_the_panel_offers_only_the_owners_groups_and_a_foreign_one_is_refused(client, user, other_user):
    conversation, _ = _shared_conversation(user)
    mine = Group.objects.create(name="我的研究组")
    theirs = Group.objects.create(name="机密项目组")
    user.groups.add(mine)
    other_user.groups.add(theirs)
    client.force_login(user)
    url = reverse("share-create", args=[conversation.pk])

    page = client.get(conversation.get_absolute_url()).content.decode()
    # What a hand-crafted request gets, with HTMX and without.
    refused = client.post(url, {"audience": "group", "group": theirs.pk}, **HTMX)
    refused_form = client.post(url, {"audience": "group", "group": theirs.pk})

    assert "我的研究组" in page and "机密项目组" not in page
    assert f'<option value="{mine.pk}">' in page and f'<option value="{theirs.pk}">' not in page
    for response in (refused, refused_form):
        html = response.content.decode()
        assert response.status_code == 422
        assert "That group cannot be chosen here. Choose one of the groups listed." in html
        assert "机密项目组" not in html
    assert not ConversationShare.objects.exists()
    # Other people's groups are not even named to the other user, who is in one.
    client.force_login(other_user)
    own = ConversationFactory(owner=other_user)
    assert "我的研究组" not in client.get(own.get_absolute_url()).content.decode()


def test_sharing_with_someone_unknown_says_so_in_the_panel(signed_in, user):
    conversation, _ = _shared_conversation(user)
    response = signed_in.post(
        reverse("share-create", args=[conversation.pk]), {"audience": "user", "username": "无名氏"}, **HTMX
    )
    assert response.status_code == 422 and "No one here is called “无名氏”." in unescape(response.content.decode())
    no_htmx = signed_in.post(reverse("share-create", args=[conversation.pk]), {"audience": "user", "username": ""})
    assert no_htmx.status_code == 422 and 'id="share-panel"' in no_htmx.content.decode()


def test_only_the_owner_shares_or_revokes(client, user, other_user):
    conversation, _ = _shared_conversation(user)
    share = ConversationShareFactory(conversation=conversation, user=other_user)
    client.force_login(other_user)

    adding = client.post(reverse("share-create", args=[conversation.pk]), {"audience": "everyone", "on": "1"}, **HTMX)
    removing = client.post(reverse("share-delete", args=[conversation.pk]), {"share": share.pk}, **HTMX)

    assert adding.status_code == removing.status_code == 404
    assert list(ConversationShare.objects.all()) == [share]


def test_a_viewer_reads_the_conversation_its_artifacts_and_activity_without_any_control(client, user, other_user):
    conversation, message = _shared_conversation(user)
    team = Group.objects.create(name="研究组")
    other_user.groups.add(team)
    ConversationShareFactory(conversation=conversation, group=team)
    client.force_login(other_user)
    run = message.runs.get()

    page = client.get(conversation.get_absolute_url(), {"artifact": "report"}).content.decode()
    pane = client.get(reverse("artifact-detail", args=[conversation.pk, "report"]), **HTMX).content.decode()
    docx = client.get(reverse("artifact-export-docx", args=[conversation.pk, "report"]))
    raw = client.get(reverse("artifact-raw", args=[conversation.pk, "report"]))
    activity = client.get(reverse("run-activity", args=[run.pk]), **HTMX)

    assert "热泵的冬季表现" in page and "它们<strong>照常</strong>工作。" in page and "第一版" in page
    assert f"Shared with you by <strong>{user.username}</strong>" in page
    assert 'id="shared-with-me"' in page and f"<small>{user.username}</small>" in page
    for control in (
        'id="composer"',
        'class="edit"',
        "Ask again",
        'id="share-panel"',
        '<details class="rename"',
        'class="artifact-upload"',
    ):
        assert control not in page, control
    for control in ("/edit/", "/delete/", "artifact-upload"):
        assert control not in pane, control
    assert "Export .docx" in pane
    assert docx.status_code == raw.status_code == activity.status_code == 200
    assert raw.content.decode() == "# 报告\n\n第一版"


def test_the_owners_page_keeps_every_control_and_lists_no_share_of_its_own(signed_in, user):
    conversation, _ = _shared_conversation(user)
    ConversationShareFactory(conversation=conversation, everyone=True)

    page = signed_in.get(conversation.get_absolute_url()).content.decode()

    assert 'id="composer"' in page and "Ask again" in page and 'id="share-panel"' in page
    assert 'id="shared-banner"' not in page and 'id="shared-with-me"' not in page


def test_a_revoked_share_or_a_group_left_opens_nothing_more(client, user, other_user):
    conversation, _ = _shared_conversation(user)
    team = Group.objects.create(name="Team")
    other_user.groups.add(team)
    ConversationShareFactory(conversation=conversation, group=team)
    by_name = ConversationShareFactory(conversation=conversation, user=other_user)
    client.force_login(other_user)

    assert client.get(conversation.get_absolute_url()).status_code == 200
    by_name.delete()
    assert client.get(conversation.get_absolute_url()).status_code == 200
    other_user.groups.remove(team)
    assert client.get(conversation.get_absolute_url()).status_code == 404
    assert 'id="shared-with-me"' not in client.get(reverse("chat")).content.decode()


def test_a_reader_continues_a_shared_thread_in_their_own_conversation(signed_in, user, other_user):
    conversation, message = _shared_conversation(other_user)
    follow_up = MessageFactory(conversation=conversation, parent=message, content="还有呢？", response="还有很多。")
    share = services.share_with_user(conversation=conversation, by=other_user, username=user.username)
    url = reverse("conversation-fork", args=[conversation.pk])

    page = signed_in.get(conversation.get_absolute_url()).content.decode()
    assert "Continue in my own conversation" in page and page.count("Continue from here") == 2
    response = signed_in.post(url, {"message": message.pk})

    fork = Conversation.objects.get(owner=user)
    assert response.status_code == 302 and response["Location"] == fork.get_absolute_url()
    assert list(fork.messages.values_list("content", flat=True)) == ["热泵冬天怎么工作？"]
    mine = signed_in.get(fork.get_absolute_url()).content.decode()
    assert "Continued from “热泵的冬季表现” by" in mine and "Open the original" in mine
    assert "# 报告" in Artifact.objects.get(session__conversation=fork, artifact_id="report").content
    # The owner's conversation is as it was.
    assert conversation.messages.count() == 2 and follow_up.children.count() == 0

    # In the reader's list the fork is told apart from the original it shares its title with, titles whole.
    listed = lxml.html.fromstring(signed_in.get(reverse("chat")).content.decode())
    (item,) = listed.xpath(f'//li[@data-conversation="{fork.pk}"]')
    assert item.find_class("conversation-title")[0].get("title") == "热泵的冬季表现"
    assert item.find_class("fork-mark")[0].text_content() == "copy"
    (original,) = listed.get_element_by_id("shared-with-me").xpath(".//a")
    assert original.get("title") == "热泵的冬季表现"
    # Once the share is revoked, the reader can neither fork again nor follow the link back.
    services.share_remove(conversation=conversation, share_id=share.pk)
    assert signed_in.post(url, {"message": message.pk}).status_code == 404
    assert Conversation.objects.filter(owner=user).count() == 1
    mine = signed_in.get(fork.get_absolute_url()).content.decode()
    assert "Continued from “热泵的冬季表现” by" in mine and "Open the original" not in mine


EXPORTS = ("conversation-export-md", "conversation-export-docx", "conversation-export-zip")


@pytest.mark.parametrize("name", EXPORTS)
def test_exports_are_the_owners_alone(client, user, other_user, name):
    conversation = ConversationFactory(owner=user)
    MessageFactory(conversation=conversation, content="秘密的问题", response="秘密的回答")
    url = reverse(name, args=[conversation.pk])

    client.force_login(other_user)
    assert client.get(url).status_code == 404
    assert client.post(url).status_code in (403, 405)
    client.force_login(user)
    response = client.get(url)

    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize(
    ("title", "saved_as"),
    [
        # Would read "reportxxx.exe" with the override; an ASCII name goes in filename.
        ("report\u202eexe.xxx", "reportexe.xxx"),
        # A non-ASCII one in filename*: none of the percent-encoded controls (%E2%80%AE, %E2%81%A6…).
        ("热泵\u2066的冬季\u2069表现\u200f\u061c\u200e\u200b\ufeff\u202e", "热泵的冬季表现"),
    ],
)
@pytest.mark.parametrize(("name", "extension"), list(zip(EXPORTS, (".md", ".docx", ".zip"), strict=True)))
def test_an_export_is_named_without_what_hides_or_reorders_text(signed_in, user, title, saved_as, name, extension):
    # Stored as the admin or a script could, around the portal's own titles.
    conversation = ConversationFactory(owner=user, title=title)
    MessageFactory(conversation=conversation, content="热泵冬天怎么工作？", response="照常工作。")

    response = signed_in.get(reverse(name, args=[conversation.pk]))

    assert download_name(response) == saved_as + extension


def test_a_long_thread_exports_in_every_format(signed_in, user, monkeypatch):
    # 40 turns of answers about 5,000 tokens long. Their structure is what is
    # checked: a machine busy enough to pass the render deadline would export
    # them as plain paragraphs (tests/artifacts/test_export.py does the same).
    monkeypatch.setattr(markdown_module, "RENDER_SECONDS", 60.0)
    conversation = ConversationFactory(owner=user, title="长对话")
    answer = "\n\n".join(f"Paragraph {n} of the answer, **with** `code` and words. " * 9 for n in range(40))
    parent = None
    for number in range(40):
        parent = MessageFactory(conversation=conversation, parent=parent, content=f"问题 {number}", response=answer)

    markdown = signed_in.get(reverse("conversation-export-md", args=[conversation.pk]))
    word = signed_in.get(reverse("conversation-export-docx", args=[conversation.pk]))
    archive = signed_in.get(reverse("conversation-export-zip", args=[conversation.pk]))

    assert markdown.content.decode().count("\n## ") == 40
    document = docx.Document(io.BytesIO(word.content))
    assert [p.text for p in document.paragraphs if p.style.name == "Heading 2"] == [
        f"Question {n}" for n in range(1, 41)
    ]
    assert document.paragraphs[-1].text.startswith("Paragraph 39")
    assert "filename*=utf-8''%E9%95%BF%E5%AF%B9%E8%AF%9D.docx" in word["Content-Disposition"]
    with zipfile.ZipFile(io.BytesIO(archive.content)) as files:
        assert files.read("conversation.md") == markdown.content


def test_the_conversation_head_offers_the_exports(signed_in, user):
    conversation = ConversationFactory(owner=user)

    page = signed_in.get(reverse("conversation-detail", args=[conversation.pk])).content.decode()

    for name in EXPORTS:
        assert reverse(name, args=[conversation.pk]) in page


def _pin_url(conversation):
    return reverse("conversation-pin", args=[conversation.pk])


def test_pinning_from_the_list_puts_the_conversation_in_a_pinned_group_on_top(signed_in, user):
    older = ConversationFactory(owner=user, title="旧的对话")
    newer = ConversationFactory(owner=user, title="新的对话")
    current = ConversationFactory(owner=user, title="Open here")

    response = signed_in.post(_pin_url(older), {"pinned": "1", "current": str(current.pk)}, **HTMX)

    page = response.content.decode()
    assert response.status_code == 200 and page.strip().startswith('<ul id="conversation-items"')
    pinned_group = page.index('id="conversation-group-pinned"')
    assert pinned_group < page.index("旧的对话") < page.index('id="conversation-group-today"') < page.index("新的对话")
    assert page.count(">旧的对话</span>") == 1 and 'data-pinned><a href="/c/' in page
    assert f'<a href="/c/{current.pk}/" aria-current="page">' in page

    signed_in.post(_pin_url(older), {"pinned": "0"}, **HTMX)
    assert "conversation-group-pinned" not in signed_in.get(reverse("chat")).content.decode()
    assert Conversation.objects.get(pk=newer.pk).pinned_at is None


def test_pinning_another_users_conversation_is_a_404(signed_in, other_user):
    theirs = ConversationFactory(owner=other_user)

    assert signed_in.post(_pin_url(theirs), {"pinned": "1"}, **HTMX).status_code == 404
    assert Conversation.objects.get(pk=theirs.pk).pinned_at is None


def test_renaming_from_the_list_answers_with_the_item_alone(signed_in, user):
    conversation = ConversationFactory(owner=user, title="Old")
    url = reverse("conversation-rename", args=[conversation.pk])

    page = signed_in.post(url, {"title": "新的标题", "source": "sidebar"}, **HTMX).content.decode()

    assert page.startswith('<li class="conversation-item"') and "新的标题" in page and "conversation-head" not in page
    assert 'id="conversation-title"' not in page
    refused = signed_in.post(url, {"title": "  ", "source": "sidebar"}, **HTMX)
    assert refused.status_code == 422 and 'role="alert"' in refused.content.decode()
    # Renamed from the list of its own open page: the page's heading follows.
    page = signed_in.post(
        url, {"title": "又改了", "source": "sidebar", "current": str(conversation.pk)}, **HTMX
    ).content.decode()
    assert '<h1 id="conversation-title" title="又改了" hx-swap-oob="true">又改了</h1>' in page


def test_deleting_another_conversation_from_the_list_removes_its_item_and_the_page_stays(signed_in, user):
    shown = ConversationFactory(owner=user)
    gone = ConversationFactory(owner=user)
    url = reverse("conversation-delete", args=[gone.pk])

    response = signed_in.post(url, {"source": "sidebar", "current": str(shown.pk)}, **HTMX)

    assert response.status_code == 200 and response.content == b"" and "HX-Redirect" not in response
    assert not Conversation.objects.filter(pk=gone.pk).exists()
    # The one the page shows: the page goes to a new conversation.
    response = signed_in.post(
        reverse("conversation-delete", args=[shown.pk]), {"source": "sidebar", "current": str(shown.pk)}, **HTMX
    )
    assert response["HX-Redirect"] == reverse("chat")


def _ended(user, *, title):
    conversation = ConversationFactory(owner=user, title=title)
    RunFactory(
        message=MessageFactory(conversation=conversation), status=Run.Status.COMPLETED, finished_at=timezone.now()
    )
    return conversation


def test_the_list_marks_runs_and_the_count_says_what_waits(signed_in, user, other_user):
    waiting = ConversationFactory(owner=user, title="等待")
    RunFactory(message=MessageFactory(conversation=waiting), status=Run.Status.WAITING_PERMISSION)
    running = ConversationFactory(owner=user, title="运行")
    RunFactory(message=MessageFactory(conversation=running), status=Run.Status.RUNNING)
    ended = _ended(user, title="完成")
    theirs = ConversationFactory(owner=other_user)
    RunFactory(message=MessageFactory(conversation=theirs), status=Run.Status.WAITING_PERMISSION)

    page = signed_in.get(reverse("chat")).content.decode()

    assert f'id="run-mark-{waiting.pk}" class="run-mark" data-mark="waiting"' in page
    assert f'id="run-mark-{running.pk}" class="run-mark" data-mark="running"' in page
    assert f'id="run-mark-{ended.pk}" class="run-mark" data-mark="finished"' in page
    # Words for a screen reader beside each icon.
    assert "Waiting for your approval</span>" in page and "Finished since you last looked</span>" in page
    assert '<span id="attention-count" data-count="2" hidden>' in page
    assert str(theirs.pk) not in page


def test_looking_at_a_conversation_whose_turn_ended_clears_its_mark(signed_in, user):
    ended = _ended(user, title="完成")

    signed_in.get(ended.get_absolute_url())

    page = signed_in.get(reverse("chat")).content.decode()
    assert f'id="run-mark-{ended.pk}" class="run-mark">' in page
    assert '<span id="attention-count" data-count="0" hidden>' in page


@pytest.mark.parametrize("count", [10, 1000])
def test_marks_and_pins_take_the_same_queries_however_many_conversations_and_runs(
    signed_in, user, count, django_assert_max_num_queries
):
    conversations = _conversations(user, count)
    Run.objects.bulk_create(
        Run(message=message, status=Run.Status.COMPLETED, finished_at=timezone.now() - timedelta(days=1))
        for message in Message.objects.bulk_create(Message(conversation=c, content="问") for c in conversations)
    )
    for conversation in conversations[:3]:
        Conversation.objects.filter(pk=conversation.pk).update(pinned_at=timezone.now())
    RunFactory(message=MessageFactory(conversation=conversations[5]), status=Run.Status.WAITING_PERMISSION)

    # the session, the user, the pinned, the page, the marks, what others shared with the user, the library's
    # titles, the user's token budget, the user's projects
    with django_assert_max_num_queries(9):
        page = signed_in.get(reverse("chat")).content.decode()

    assert page.count('data-mark="waiting"') == 1 and page.count("data-pinned>") == 3
