"""Which artifact the pane shows: the newest by default, the one chosen when
there is a choice, and the choice in the conversation page's URL."""

import re
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from agents.models import Run
from artifacts.branches import branch_shown
from artifacts.manager import ArtifactManager
from artifacts.models import ArtifactVersion
from artifacts.selectors import artifact_list
from tests.artifacts.test_views import HTMX, _flushed, _url
from tests.factories import ConversationFactory, MessageFactory, RunFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def notes_and_report(conversation):
    """Notes in two versions, then a report written after them."""
    _flushed(conversation, "notes", "# Notes v1", "# Notes v2")
    _flushed(conversation, "report", "# Report")
    _updated(conversation, "notes", "report")


def _updated(conversation, *artifact_ids):
    """Marks the artifacts as changed in this order, oldest first."""
    start = timezone.now() - timedelta(hours=1)
    for minutes, artifact_id in enumerate(artifact_ids):
        ArtifactVersion.objects.filter(
            artifact__session=conversation.artifact_session, artifact__artifact_id=artifact_id
        ).update(created_at=start + timedelta(minutes=minutes))


def _shown(html) -> str:
    """The id of the artifact the pane shows."""
    return re.search(r'<p class="meta">\s*<code>([^<]+)</code>', html)[1]


def _refresh_url(html) -> str:
    return re.search(r'<aside id="artifact-pane"[^>]*\shx-get="([^"]*)"', html)[1].replace("&amp;", "&")


def test_by_default_the_pane_shows_what_the_latest_turn_wrote_not_the_plan(signed_in, conversation):
    _flushed(conversation, "notes", "# Notes")
    _flushed(conversation, "report", "# Report")
    _flushed(conversation, "task_plan", "- [x] write the report")
    _updated(conversation, "notes", "report", "task_plan")

    html = signed_in.get(conversation.get_absolute_url()).content.decode()

    assert _shown(html) == "report"
    # Nobody chose: a refresh after a change follows the newest artifact.
    assert _refresh_url(html) == _url("artifact-pane", conversation)
    _updated(conversation, "report", "task_plan", "notes")
    assert _shown(signed_in.get(_url("artifact-pane", conversation), **HTMX).content.decode()) == "notes"


def test_the_default_falls_back_to_the_plan_then_to_what_a_running_turn_writes(signed_in, conversation):
    _flushed(conversation, "task_plan", "- [ ] search")
    assert _shown(signed_in.get(conversation.get_absolute_url()).content.decode()) == "task_plan"

    _flushed(conversation, "report", "# Report")
    run = RunFactory(message=MessageFactory(conversation=conversation), status=Run.Status.RUNNING)
    ArtifactManager(branch=branch_shown(conversation=conversation), run_id=run.pk).create(
        artifact_id="draft", content="new"
    )
    _updated(conversation, "task_plan", "report")

    assert _shown(signed_in.get(_url("artifact-pane", conversation), **HTMX).content.decode()) == "draft"


def test_a_chosen_artifact_stays_when_the_pane_refreshes(signed_in, conversation):
    _flushed(conversation, "report", "# Report")
    _flushed(conversation, "notes", "# Notes")
    _updated(conversation, "report", "notes")

    html = signed_in.get(_url("artifact-detail", conversation, "report"), **HTMX).content.decode()

    assert _shown(html) == "report"
    assert _refresh_url(html) == _url("artifact-detail", conversation, "report")


@pytest.mark.parametrize(
    ("query", "shown", "text"),
    [
        ("?artifact=notes", "notes", "<h1>Notes v2</h1>"),
        (
            "?artifact=notes&version=1",
            "notes",
            "You are viewing version 1 of 2 on this branch (v1) — not the current text.",
        ),
        (
            "?artifact=notes&from=1&to=2",
            "notes",
            "Changes from version 1 on this branch (v1) to version 2 on this branch (v2)",
        ),
    ],
)
def test_the_page_url_opens_the_pane_on_what_it_names(signed_in, conversation, notes_and_report, query, shown, text):
    response = signed_in.get(conversation.get_absolute_url() + query)

    html = response.content.decode()
    assert response.status_code == 200 and 'id="composer"' in html
    assert _shown(html) == shown and text in html
    assert re.search(r'<a href="[^"]*\?artifact=notes"\s+hx-get="[^"]*"[^>]*\s+aria-current="true"', html)
    # What the URL chose stays chosen when the pane refreshes.
    assert _refresh_url(html).startswith(_url("artifact-detail", conversation, "notes"))


@pytest.mark.parametrize(
    ("query", "shown", "notice"),
    [
        (
            "?artifact=missing",
            "report",
            "The artifact this link names is not on this branch of the conversation; showing the newest.",
        ),
        (
            "?artifact=nul%00id",
            "report",
            "The artifact this link names is not on this branch of the conversation; showing the newest.",
        ),
        (
            "?artifact=notes&version=9",
            "notes",
            "This link names a version that is not saved; showing the current text.",
        ),
        (
            "?artifact=notes&version=%C2%B2",
            "notes",
            "This link names a version that is not saved; showing the current text.",
        ),
        (
            "?artifact=notes&from=1&to=9",
            "notes",
            "This link compares versions that are not saved; showing the current text.",
        ),
    ],
)
def test_a_url_naming_what_is_not_there_opens_the_page_with_a_notice(
    signed_in, conversation, notes_and_report, query, shown, notice
):
    response = signed_in.get(conversation.get_absolute_url() + query)

    assert response.status_code == 200
    html = response.content.decode()
    assert _shown(html) == shown and notice in html
    assert "not the current text" not in html and "Changes from" not in html


def test_another_users_conversation_is_a_404_and_their_artifact_ids_name_nothing_in_mine(
    signed_in, conversation, other_user
):
    theirs = ConversationFactory(owner=other_user)
    _flushed(theirs, "secret", "their secret text", "their newer secret")
    _flushed(conversation, "report", "# Mine")

    their_page = signed_in.get(theirs.get_absolute_url() + "?artifact=secret&version=1")
    my_page = signed_in.get(conversation.get_absolute_url() + "?artifact=secret&version=1")

    assert their_page.status_code == 404
    assert my_page.status_code == 200
    assert "their secret" not in my_page.content.decode() and _shown(my_page.content.decode()) == "report"


@pytest.mark.parametrize(
    ("name", "args", "query", "pushed"),
    [
        ("artifact-detail", ["report"], "", "?artifact=report"),
        ("artifact-detail", ["report"], "?version=1", "?artifact=report&version=1"),
        ("artifact-diff", ["report"], "?from=1&to=2", "?artifact=report&from=1&to=2"),
    ],
)
def test_choosing_in_the_pane_pushes_the_page_url_that_shows_it(signed_in, conversation, name, args, query, pushed):
    _flushed(conversation, "report", "# v1", "# v2")
    page = conversation.get_absolute_url()

    response = signed_in.get(
        _url(name, conversation, *args) + query, HTTP_HX_CURRENT_URL=f"http://testserver{page}", **HTMX
    )
    again = signed_in.get(
        _url(name, conversation, *args) + query, HTTP_HX_CURRENT_URL=f"http://testserver{page}{pushed}", **HTMX
    )
    without_htmx = signed_in.get(_url(name, conversation, *args) + query)

    assert response["HX-Push-Url"] == page + pushed
    # Already there: no second history entry for the same place.
    assert "HX-Push-Url" not in again and "HX-Push-Url" not in without_htmx
    assert signed_in.get(page + pushed).status_code == 200


def test_the_panes_own_refresh_never_moves_the_address(signed_in, conversation):
    _flushed(conversation, "report", "# v1", "# v2")
    page = conversation.get_absolute_url()

    # The address names an artifact that is not there; the refresh shows the newest instead.
    refresh = signed_in.get(
        _url("artifact-pane", conversation),
        HTTP_HX_CURRENT_URL=f"http://testserver{page}?artifact=gone.md",
        HTTP_HX_TRIGGER="artifact-pane",
        **HTMX,
    )
    chosen = signed_in.get(
        _url("artifact-pane", conversation), HTTP_HX_CURRENT_URL=f"http://testserver{page}?artifact=gone.md", **HTMX
    )

    assert refresh.status_code == 200 and "HX-Push-Url" not in refresh
    assert chosen["HX-Push-Url"] == page


def test_an_upload_pushes_the_url_of_the_new_artifact(signed_in, conversation):
    response = signed_in.post(
        _url("artifact-pane", conversation), {"file": SimpleUploadedFile("notes.md", b"# N")}, **HTMX
    )

    assert response["HX-Push-Url"] == conversation.get_absolute_url() + "?artifact=notes.md"


def test_the_list_preview_is_the_text_without_its_markdown_marks(signed_in, conversation):
    _flushed(
        conversation,
        "report",
        "# Findings\n\nIntro with **bold** and `code`, [a link](https://x.test) <b>raw</b>.\n\n- [ ] open item\n",
    )
    _flushed(conversation, "tool.py", "# a comment, not a heading\nx = 1\n", content_type="text/x-python")
    _flushed(conversation, "long", "**Word** " * 200)

    previews = {
        view.artifact_id: view.preview for view in artifact_list(branch=branch_shown(conversation=conversation))
    }
    html = signed_in.get(conversation.get_absolute_url()).content.decode()

    assert previews["report"] == "Findings Intro with bold and code, a link raw. open item"
    assert previews["tool.py"] == "# a comment, not a heading x = 1"
    assert previews["long"] == ("Word " * 40).strip() + "…"
    assert '<span class="preview">Findings Intro with bold and code, a link raw. open item</span>' in html
