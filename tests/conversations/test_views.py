import pytest
from django.urls import reverse

from agents.models import Run
from conversations.models import Conversation
from tests.factories import ConversationFactory, MessageFactory, RunFactory

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


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
