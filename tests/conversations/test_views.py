import gzip
import re
from datetime import timedelta
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from agents.models import Run
from artifacts.manager import ArtifactManager
from artifacts.models import ArtifactSession
from conversations import selectors, services
from conversations.models import Conversation
from tests.factories import PASSWORD, ConversationFactory, MessageFactory, RunFactory

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


def test_posting_answers_with_the_thread_including_the_new_message(signed_in, user):
    conversation = ConversationFactory(owner=user)
    response = signed_in.post(reverse("message-create", args=[conversation.pk]), {"content": "Next?"}, **HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="thread"' in html
    assert "Next?" in html
    assert 'data-status="queued"' in html


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
    response = signed_in.post(
        reverse("message-create", args=[conversation.pk]), {"content": "x", "parent": foreign.pk}
    )
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
        response='**bold** <script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1))',
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
    assert "Writing…" in html


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
    assert page.count("<li>") == 1 and "Heat pumps" in page and 'aria-current="page"' in page
    empty = signed_in.get(reverse("conversation-search"), {"q": "nothing like it"}, **HTMX).content.decode()
    assert "No conversation matches “nothing like it”" in empty
    assert "Batteries" not in signed_in.get(reverse("chat"), {"q": "heat"}).content.decode()


def test_rename_updates_the_head_and_the_list(signed_in, user):
    conversation = ConversationFactory(owner=user, title="Old")

    response = signed_in.post(reverse("conversation-rename", args=[conversation.pk]), {"title": "New <b>name</b>"}, **HTMX)

    page = response.content.decode()
    assert response.status_code == 200
    assert "<h1>New &lt;b&gt;name&lt;/b&gt;</h1>" in page and 'id="conversation-items" hx-swap-oob="true"' in page
    error = signed_in.post(reverse("conversation-rename", args=[conversation.pk]), {"title": " "}, **HTMX)
    assert error.status_code == 422 and "needs a title" in error.content.decode()
    conversation.refresh_from_db()
    assert conversation.title == "New <b>name</b>"


def test_delete_redirects_to_the_start_and_another_users_is_a_404(signed_in, user, other_user):
    mine = ConversationFactory(owner=user)
    theirs = ConversationFactory(owner=other_user)

    assert signed_in.post(reverse("conversation-delete", args=[theirs.pk]), **HTMX).status_code == 404
    assert signed_in.post(reverse("conversation-rename", args=[theirs.pk]), {"title": "mine"}, **HTMX).status_code == 404
    response = signed_in.post(reverse("conversation-delete", args=[mine.pk]), **HTMX)

    assert response.headers["HX-Redirect"] == reverse("chat")
    assert list(Conversation.objects.all()) == [theirs]


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


def _conversations(user, count: int) -> list[Conversation]:
    """`count` conversations a second apart, newest first."""
    now = timezone.now()
    conversations = Conversation.objects.bulk_create(Conversation(owner=user, title=f"c{i}") for i in range(count))
    ArtifactSession.objects.bulk_create(ArtifactSession(conversation=c) for c in conversations)
    for i, conversation in enumerate(conversations):
        conversation.updated_at = now - timedelta(seconds=i)
    Conversation.objects.bulk_update(conversations, ["updated_at"])
    return conversations


_ITEM = re.compile(r'<li><a href="/c/([0-9a-f-]+)/"')
_MORE = re.compile(r'<li class="more"><a href="([^"]+)" hx-get="([^"]+)" hx-target="closest li" hx-swap="outerHTML">Load more</a></li>')


def _items(html: str) -> list[str]:
    return _ITEM.findall(html)


def _more(html: str) -> tuple[str, str] | None:
    """The no-JS and the HTMX URL of the list's "Load more"."""
    found = _MORE.search(html)
    return (unescape(found[1]), unescape(found[2])) if found else None


@pytest.mark.parametrize("count", [10, 1000])
def test_the_chat_page_and_a_list_page_take_the_same_few_queries_however_many_conversations(
    signed_in, user, count, django_assert_max_num_queries
):
    conversations = _conversations(user, count)
    conversation = ConversationFactory(owner=user)
    before = selectors.conversation_list(user=user, limit=5).next_cursor
    # the session, the user, the list's page
    with django_assert_max_num_queries(3):
        chat = signed_in.get(reverse("chat")).content.decode()
    with django_assert_max_num_queries(3):
        more = signed_in.get(reverse("conversation-search"), {"before": before}, **HTMX).content.decode()
    # and the conversation, its thread and its artifact pane
    with django_assert_max_num_queries(3 + 5):
        signed_in.get(conversation.get_absolute_url())
    assert len(_items(chat)) == min(count + 1, 50) and str(conversations[0].pk) in chat
    assert len(_items(more)) == min(count + 1 - 5, 50)


def test_load_more_appends_the_next_page_in_place_of_itself_until_the_last(signed_in, user):
    conversations = _conversations(user, 120)

    first = signed_in.get(reverse("chat")).content.decode()
    second = signed_in.get(_more(first)[1], **HTMX).content.decode()
    third = signed_in.get(_more(second)[1], **HTMX).content.decode()

    assert "<ul" not in second and "<nav" not in second
    assert [len(_items(page)) for page in (first, second, third)] == [50, 50, 20]
    assert _items(first) + _items(second) + _items(third) == [str(c.pk) for c in conversations]
    assert _more(third) is None and "No conversations yet" not in third


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


def test_search_results_load_more_with_the_query(signed_in, user):
    _conversations(user, 10)
    for i in range(55):
        ConversationFactory(owner=user, title=f"Postgres {i}")

    first = signed_in.get(reverse("conversation-search"), {"q": "postgres"}, **HTMX).content.decode()
    href, htmx_url = _more(first)
    rest = signed_in.get(htmx_url, **HTMX).content.decode()

    assert "q=postgres" in href and "q=postgres" in htmx_url
    assert len(_items(first)) == 50 and len(_items(rest)) == 5 and "<mark>Postgres</mark>" in rest
    without_js = signed_in.get(reverse("conversation-search"), {"q": "postgres", "before": "x"})
    assert without_js.url == reverse("chat") + "?q=postgres&before=x"


def test_pages_are_gzipped_for_a_browser_that_accepts_it(signed_in, user):
    _conversations(user, 60)

    response = signed_in.get(reverse("chat"), HTTP_ACCEPT_ENCODING="gzip, deflate, br")

    assert response["Content-Encoding"] == "gzip" and "Accept-Encoding" in response["Vary"]
    assert len(_items(gzip.decompress(response.content).decode())) == 50
    assert "Content-Encoding" not in signed_in.get(reverse("chat"))


def test_with_redis_down_one_signs_in_and_sees_a_running_turn(disposable_redis, client, user, other_user):
    conversation = services.conversation_start(user=user, content="Still thinking?", enqueue=False)
    message = conversation.active_branch
    run = message.runs.get()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    ArtifactManager(session=conversation.artifact_session, run_id=run.pk).create(
        artifact_id="draft", content="work in progress"
    )
    theirs = ConversationFactory(owner=other_user)
    disposable_redis.kill()

    # Sessions and sign-in throttling (django-axes) keep to the database.
    signed = client.post(reverse("login"), {"username": user.username, "password": PASSWORD})
    page = client.get(reverse("conversation-detail", args=[conversation.pk]))
    posted = client.post(reverse("message-create", args=[conversation.pk]), {"content": "And then?"}, **HTMX)

    assert signed.status_code == 302
    assert page.status_code == 200 and posted.status_code == 200 and "And then?" in posted.content.decode()
    html = page.content.decode()
    assert f'id="message-{message.pk}"' in html and "work in progress" not in html
    assert client.get(reverse("conversation-detail", args=[theirs.pk])).status_code == 404
