"""Old versions in the pane: said plainly, restored as a new version, edited
from, and the editor's preview."""

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from agents.models import Run
from artifacts.branches import branch_shown
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact
from tests.artifacts.test_views import HTMX, _flushed, _url
from tests.factories import MessageFactory, RunFactory

pytestmark = pytest.mark.django_db

OLD_VERSION_NOTICE = "You are viewing version 1 of 3 on this branch (v1) — not the current text."


@pytest.fixture
def report(conversation):
    return _flushed(conversation, "report", "# First draft\n", "# Second draft\n", "# Third draft\n")


def _hidden(html, name) -> str:
    return re.search(rf'<input type="hidden" name="{name}" value="([^"]*)">', html)[1]


def test_an_old_version_says_so_and_offers_restore_and_the_current_one_does_not(signed_in, conversation, report):
    old = signed_in.get(_url("artifact-detail", conversation, "report") + "?version=1", **HTMX).content.decode()
    current = signed_in.get(_url("artifact-detail", conversation, "report") + "?version=3", **HTMX).content.decode()

    assert OLD_VERSION_NOTICE in old and "<h1>First draft</h1>" in old
    assert f'action="{_url("artifact-restore", conversation, "report")}"' in old
    assert "csrfmiddlewaretoken" in old[old.index('class="old-version"') :]
    assert _hidden(old, "version") == "1" and _hidden(old, "base_version") == "3"
    assert "not the current text" not in current and "Restore this version" not in current


def test_restore_saves_the_old_text_as_a_new_version(signed_in, conversation, report):
    response = signed_in.post(
        _url("artifact-restore", conversation, "report"),
        {"version": "1", "base_version": report.current_version},
        **HTMX,
    )

    report.refresh_from_db()
    html = response.content.decode()
    assert response.status_code == 200
    assert report.content == "# First draft\n" and report.current_version == 4
    assert list(report.versions.values_list("version", "update_type")) == [
        (1, "create"),
        (2, "rewrite"),
        (3, "rewrite"),
        (4, "restore"),
    ]
    assert "The text of version 1 on this branch (v1) is current again, as version 4 on this branch (v4)." in html
    assert "not the current text" not in html
    # The page's URL now names the artifact, no longer the old version.
    assert response["HX-Push-Url"] == conversation.get_absolute_url() + "?artifact=report"


def test_restore_over_a_newer_write_saves_nothing_and_offers_the_choice(signed_in, conversation, report):
    stale = report.current_version
    manager = ArtifactManager(branch=branch_shown(conversation=conversation))
    manager.rewrite(artifact_id="report", content="# Agent's fourth draft\n")
    manager.flush_all()

    response = signed_in.post(
        _url("artifact-restore", conversation, "report"), {"version": "1", "base_version": stale}, **HTMX
    )
    html = response.content.decode()

    assert response.status_code == 409
    assert "This artifact changed since the page showed it: version 4 on this branch (v4) was saved meanwhile." in html
    assert "the text of version 1 on this branch (v1), which you restored" in html
    assert _hidden(html, "base_version") == "4"
    assert list(report.versions.values_list("content", flat=True))[-1] == "# Agent's fourth draft\n"

    kept = signed_in.post(
        _url("artifact-edit", conversation, "report"),
        {"content": "# First draft\n", "base_version": "4", "choice": "mine"},
        **HTMX,
    )
    assert kept.status_code == 200
    assert list(report.versions.values_list("content", flat=True))[-2:] == [
        "# Agent's fourth draft\n",
        "# First draft\n",
    ]


def test_restore_needs_a_csrf_token_and_a_post(user, conversation, report):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    url = _url("artifact-restore", conversation, "report")
    page = client.get(_url("artifact-detail", conversation, "report") + "?version=1").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page[page.index('class="old-version"') :])[1]

    refused = client.post(url, {"version": "1", "base_version": report.current_version})
    wrong_method = client.get(url + "?version=1")
    accepted = client.post(url, {"version": "1", "base_version": report.current_version, "csrfmiddlewaretoken": token})

    assert (refused.status_code, wrong_method.status_code, accepted.status_code) == (403, 405, 200)
    assert Artifact.objects.get(pk=report.pk).current_version == 4


@pytest.mark.parametrize(("data", "status"), [({"version": "9", "base_version": "1"}, 404), ({"version": "1"}, 422)])
def test_restore_of_a_missing_version_or_from_a_broken_form_changes_nothing(
    signed_in, conversation, report, data, status
):
    response = signed_in.post(_url("artifact-restore", conversation, "report"), data, **HTMX)

    assert response.status_code == status
    assert Artifact.objects.get(pk=report.pk).current_version == 3
    if status == 422:
        assert "The page is out of date; reload it." in response.content.decode()


def test_while_a_turn_writes_the_artifact_an_old_version_is_not_offered_for_restore(signed_in, conversation, report):
    run = RunFactory(message=MessageFactory(conversation=conversation), status=Run.Status.RUNNING)
    ArtifactManager(branch=branch_shown(conversation=conversation), run_id=run.pk).rewrite(
        artifact_id="report", content="# Live\n"
    )

    html = signed_in.get(conversation.get_absolute_url() + "?artifact=report&version=1").content.decode()

    assert "You are viewing version 1 of 3 on this branch (v1) — not the current text." in html
    assert "It can be restored once the running turn has saved its work." in html
    assert "Restore this version" not in html


def test_edit_starts_from_the_version_shown_and_saves_a_new_one(signed_in, conversation, report):
    old = signed_in.get(_url("artifact-detail", conversation, "report") + "?version=1", **HTMX).content.decode()
    edit_url = _url("artifact-edit", conversation, "report") + "?version=1"
    assert f'href="{edit_url}"' in old

    form = signed_in.get(edit_url, **HTMX)
    html = form.content.decode()
    saved = signed_in.post(
        _url("artifact-edit", conversation, "report"),
        {"content": "# First draft, revised\n", "base_version": _hidden(html, "base_version")},
        **HTMX,
    )

    assert '<textarea id="artifact-content" name="content" rows="18"># First draft\n</textarea>' in html
    assert "Starting from the text of version 1 on this branch (v1)" in html
    # The editor is a passing state: the address stays on what was shown.
    assert "HX-Push-Url" not in form
    report.refresh_from_db()
    assert saved.status_code == 200
    assert (report.current_version, report.content) == (4, "# First draft, revised\n")
    assert signed_in.get(_url("artifact-edit", conversation, "report") + "?version=9", **HTMX).status_code == 404


def test_a_refused_edit_keeps_the_text_typed(signed_in, conversation, report):
    response = signed_in.post(_url("artifact-edit", conversation, "report"), {"content": "my careful <words>"}, **HTMX)

    assert response.status_code == 422
    assert "my careful &lt;words&gt;</textarea>" in response.content.decode()
    assert Artifact.objects.get(pk=report.pk).current_version == 3


def test_the_preview_renders_the_editors_text_as_the_pane_would_safely(signed_in, conversation, report):
    url = _url("artifact-preview", conversation, "report")

    response = signed_in.post(
        url, {"content": "# Plan\n\n- [x] **done**\n<script>alert(1)</script>[x](javascript:alert(1))"}, **HTMX
    )

    html = response.content.decode()
    assert response.status_code == 200 and 'id="edit-preview"' in html
    assert "<h1>Plan</h1>" in html and "<strong>done</strong>" in html and 'type="checkbox"' in html
    assert "<script>" not in html and 'href="javascript:' not in html
    assert signed_in.get(url).status_code == 405
    assert Artifact.objects.get(pk=report.pk).current_version == 3


def test_the_editor_offers_the_preview(signed_in, conversation, report):
    html = signed_in.get(_url("artifact-edit", conversation, "report"), **HTMX).content.decode()

    assert f'hx-post="{_url("artifact-preview", conversation, "report")}"' in html
    assert '<section id="edit-preview" class="edit-preview" aria-label="Preview" hidden>' in html


def test_a_binary_upload_has_no_preview_or_restore(signed_in, conversation):
    png = SimpleUploadedFile("c.png", b"\x89PNG\r\n\x1a\n\x00")
    signed_in.post(reverse("artifact-pane", args=[conversation.pk]), {"file": png}, **HTMX)
    assert signed_in.post(_url("artifact-preview", conversation, "c.png"), {"content": "x"}).status_code == 404
    assert (
        signed_in.post(
            _url("artifact-restore", conversation, "c.png"), {"version": "1", "base_version": "1"}
        ).status_code
        == 404
    )
