import asyncio
import io
import re
import sys
import threading
import time
import traceback
from importlib import import_module
from pathlib import Path
from urllib.parse import unquote

import docx
import pytest
from asgiref.testing import ApplicationCommunicator
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart
from django.urls import reverse

from agents.models import Run
from artifactflow import markdown
from artifactflow.asgi import application
from artifacts import services
from artifacts.branches import branch_shown
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact
from artifacts.services import artifact_version_save
from tests.asgi import http_scope
from tests.bounded import finishes_within
from tests.factories import (
    ArtifactFactory,
    ConversationFactory,
    MessageFactory,
    RunFactory,
    docx_of_xml,
    pdf_bytes,
    pdf_sharing_one_stream,
)

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
REPORT = """# Findings

Intro with **bold** text.

## Sources

- first
  - nested
- second

| name | value |
|------|-------|
| a    | 1     |
"""


def _flushed(conversation, artifact_id, *contents, content_type="text/markdown"):
    """An artifact saved once per content, as successive turns would."""
    for i, content in enumerate(contents):
        manager = ArtifactManager(branch=branch_shown(conversation=conversation))
        if i == 0:
            manager.create(artifact_id=artifact_id, content=content, content_type=content_type)
        else:
            manager.rewrite(artifact_id=artifact_id, content=content)
        manager.flush_all()
    return Artifact.objects.get(session=conversation.artifact_session, artifact_id=artifact_id)


def _url(name, conversation, *args):
    return reverse(name, args=[conversation.pk, *args])


def test_another_users_artifacts_are_a_404_on_every_url(signed_in, other_user):
    theirs = ConversationFactory(owner=other_user)
    _flushed(theirs, "report", "secret v1", "secret v2")
    gets = [
        _url("artifact-pane", theirs),
        _url("artifact-detail", theirs, "report"),
        _url("artifact-diff", theirs, "report") + "?from=1&to=2",
        _url("artifact-edit", theirs, "report"),
        _url("artifact-edit", theirs, "report") + "?recover=1",
        _url("artifact-export-docx", theirs, "report"),
        _url("artifact-raw", theirs, "report"),
    ]
    for url in gets:
        assert signed_in.get(url).status_code == 404, url
    posts = [
        (_url("artifact-edit", theirs, "report"), {"content": "mine now", "base_version": "2"}),
        (_url("artifact-restore", theirs, "report"), {"version": "1", "base_version": "2"}),
        *(
            (_url("artifact-edit", theirs, "report"), {"content": "mine", "base_version": "1", "choice": choice})
            for choice in ("mine", "theirs", "merge")
        ),
        (_url("artifact-conflict-dismiss", theirs, "report"), {"version": "2"}),
        (_url("artifact-preview", theirs, "report"), {"content": "# mine"}),
        (_url("artifact-pane", theirs), {"file": SimpleUploadedFile("x.md", b"x")}),
    ]
    for url, data in posts:
        assert signed_in.post(url, data).status_code == 404, url
    assert signed_in.get(theirs.get_absolute_url() + "?artifact=report&version=1").status_code == 404
    assert Artifact.objects.get(session=theirs.artifact_session).content == "secret v2"


def test_the_chat_page_pins_the_task_plan_with_its_progress(signed_in, conversation):
    _flushed(conversation, "report", "- [x] not a plan")
    _flushed(conversation, "task_plan", "# Plan\n- [x] search\n  * [X] nested\n- [ ] write\n\nNot [x] a box")

    html = signed_in.get(conversation.get_absolute_url()).content.decode()

    assert 'id="artifact-pane"' in html
    start = html.index('class="pinned"')
    pinned = html[start : html.index(">report<", start)]
    assert "/artifacts/task_plan/" in pinned
    assert '<progress value="2" max="3" aria-label="Task plan progress">' in html and "2 of 3 done" in html
    assert html.count('aria-label="Task plan progress"') == 1


def test_markdown_is_sanitised_and_code_is_highlighted(signed_in, conversation):
    _flushed(
        conversation, "evil.md", "# Hi\n<script>alert(1)</script><img src=x onerror=alert(1)> [x](javascript:alert(1))"
    )
    _flushed(conversation, "tool.py", "def f():\n    return '<b>'\n", content_type="text/x-python")

    evil = signed_in.get(_url("artifact-detail", conversation, "evil.md"), **HTMX).content.decode()
    code = signed_in.get(_url("artifact-detail", conversation, "tool.py"), **HTMX).content.decode()

    assert "<h1>Hi</h1>" in evil
    assert "<script>alert" not in evil and "<img" not in evil and 'href="javascript:' not in evil
    assert 'class="highlight"' in code and "&lt;b&gt;" in code and "<b>" not in code


def test_a_version_can_be_shown_and_two_compared(signed_in, conversation):
    _flushed(conversation, "report", "line one\nline two\n", "line one\nline 2\nline three\n")

    old = signed_in.get(_url("artifact-detail", conversation, "report") + "?version=1", **HTMX).content.decode()
    diff = signed_in.get(_url("artifact-diff", conversation, "report") + "?from=1&to=2", **HTMX).content.decode()

    assert "line two" in old and "version 1 of 2" in old
    assert '<div class="diff-line diff-del"><span class="diff-sign">-</span>line <del>two</del></div>' in diff
    assert '<div class="diff-line diff-add"><span class="diff-sign">+</span>line <ins>2</ins></div>' in diff
    assert '<div class="diff-line diff-add"><span class="diff-sign">+</span>line three</div>' in diff
    # A refresh after another change keeps the user on what they look at.
    assert f'hx-get="{_url("artifact-detail", conversation, "report")}?version=1"' in old
    assert f'hx-get="{_url("artifact-diff", conversation, "report")}?from=1&amp;to=2"' in diff
    assert signed_in.get(_url("artifact-detail", conversation, "report") + "?version=9").status_code == 404


def test_an_edit_saves_a_new_version(signed_in, conversation):
    artifact = _flushed(conversation, "report", "draft")

    response = signed_in.post(
        _url("artifact-edit", conversation, "report"),
        {"content": "edited\r\nby me", "base_version": artifact.current_version},
        **HTMX,
    )

    artifact.refresh_from_db()
    assert response.status_code == 200
    assert artifact.content == "edited\nby me"
    assert list(artifact.versions.values_list("version", "update_type")) == [(1, "create"), (2, "user_edit")]


MINE = "# 报告\n\n热泵在零下十度仍然有效。\n\n我的补充：地源热泵更贵。\n"
THEIRS = "# 报告\n\n热泵在零下十五度仍然有效。\n"


def _raced(conversation, *, base="# 报告\n\n热泵在零下十度仍然有效。\n"):
    """The report the user opened at v1, which an agent's save took to v2 while they edited."""
    artifact = _flushed(conversation, "report", base)
    manager = ArtifactManager(branch=branch_shown(conversation=conversation))
    manager.rewrite(artifact_id="report", content=THEIRS)
    manager.flush_all()
    return artifact


def _contents(artifact):
    return list(artifact.versions.order_by("version").values_list("content", flat=True))


def _edit(client, conversation, **data):
    return client.post(_url("artifact-edit", conversation, "report"), {"content": MINE, **data}, **HTMX)


def test_an_edit_from_a_stale_form_saves_nothing_and_offers_the_choice(signed_in, conversation):
    artifact = _raced(conversation)

    response = _edit(signed_in, conversation, base_version="1")

    html = response.content.decode()
    assert response.status_code == 409
    assert _contents(artifact) == ["# 报告\n\n热泵在零下十度仍然有效。\n", THEIRS]
    assert "This artifact changed since you started editing: version 2 on this branch (v2) was saved meanwhile." in html
    # The word diff theirs → mine, their text, and mine still in the editor.
    assert '<span class="diff-sign">+</span>我的补充：地源热泵更贵。</div>' in html
    assert f"readonly>{THEIRS}</textarea>" in html
    assert f'name="content" rows="18">{MINE}</textarea>' in html
    assert re.search(r'name="base_version" value="2"', html)
    for choice in ("mine", "theirs", "merge"):
        assert f'name="choice" value="{choice}"' in html
    assert "Save as a new version" not in html


def test_keep_mine_saves_my_text_over_theirs(signed_in, conversation):
    artifact = _raced(conversation)

    response = _edit(signed_in, conversation, base_version="2", choice="mine")

    assert response.status_code == 200 and "地源热泵更贵" in response.content.decode()
    assert _contents(artifact)[1:] == [THEIRS, MINE]
    assert artifact.versions.get(version=3).update_type == "user_edit"


def test_keep_mine_when_it_moved_on_again_asks_again(signed_in, conversation):
    artifact = _raced(conversation)
    manager = ArtifactManager(branch=branch_shown(conversation=conversation))
    manager.rewrite(artifact_id="report", content="# 报告\n\n第三稿。\n")
    manager.flush_all()

    response = _edit(signed_in, conversation, base_version="2", choice="mine")

    html = response.content.decode()
    assert response.status_code == 409
    assert "version 3 on this branch (v3) was saved meanwhile" in html
    assert re.search(r'name="base_version" value="3"', html)
    assert _contents(artifact)[-1] == "# 报告\n\n第三稿。\n"


def test_keep_theirs_discards_mine_and_the_session_keeps_it_to_recover(signed_in, conversation):
    artifact = _raced(conversation)

    discarded = _edit(signed_in, conversation, base_version="2", choice="theirs").content.decode()

    assert _contents(artifact)[1:] == [THEIRS]
    assert "Your text was discarded; theirs is current." in discarded
    assert "热泵在零下十五度仍然有效" in discarded
    recover = _url("artifact-edit", conversation, "report") + "?recover=1"
    assert f'href="{recover}"' in discarded and "Recover the text you discarded" in discarded
    # It stays on the pane's refreshes while the session keeps it.
    assert (
        "Recover the text you discarded"
        in signed_in.get(_url("artifact-detail", conversation, "report")).content.decode()
    )

    editor = signed_in.get(recover, **HTMX).content.decode()
    assert f'name="content" rows="18">{MINE}</textarea>' in editor
    assert re.search(r'name="base_version" value="2"', editor)
    _edit(signed_in, conversation, base_version="2")
    assert _contents(artifact)[-1] == MINE
    # Saved, it is no longer offered.
    assert "Recover the text" not in signed_in.get(_url("artifact-detail", conversation, "report")).content.decode()
    assert signed_in.get(recover).status_code == 404


def test_edit_a_merge_reopens_the_editor_on_theirs_with_mine_beside(signed_in, conversation):
    artifact = _raced(conversation)

    merging = _edit(signed_in, conversation, base_version="2", choice="merge")

    html = merging.content.decode()
    assert merging.status_code == 200 and _contents(artifact)[1:] == [THEIRS]
    assert "Their text, version 2 on this branch (v2) (read only)" in html
    assert f"readonly>{THEIRS}</textarea>" in html
    assert f'name="content" rows="18">{MINE}</textarea>' in html
    assert re.search(r'name="base_version" value="2"', html) and 'name="choice"' not in html
    merged = THEIRS + "\n我的补充：地源热泵更贵。\n"
    saved = signed_in.post(
        _url("artifact-edit", conversation, "report"), {"content": merged, "base_version": "2"}, **HTMX
    )
    assert saved.status_code == 200 and _contents(artifact)[-1] == merged


def test_the_session_keeps_a_few_discarded_texts_none_too_long(signed_in, conversation, settings):
    for number in range(services.DISCARDED_MAX_COUNT + 1):
        _flushed(conversation, f"notes_{number}", "first", "second")
        signed_in.post(
            _url("artifact-edit", conversation, f"notes_{number}"),
            {"content": f"mine {number}", "base_version": "2", "choice": "theirs"},
            **HTMX,
        )
    kept = signed_in.session[services.DISCARDED_KEY]
    assert [entry[2] for entry in kept] == [f"mine {n}" for n in range(1, services.DISCARDED_MAX_COUNT + 1)]
    assert signed_in.get(_url("artifact-edit", conversation, "notes_0") + "?recover=1").status_code == 404

    too_long = "长" * (services.DISCARDED_MAX_CHARS + 1)
    refused = signed_in.post(
        _url("artifact-edit", conversation, "notes_1"),
        {"content": too_long, "base_version": "2", "choice": "theirs"},
        **HTMX,
    )
    assert refused.status_code == 422
    assert services.DISCARDED_TOO_LONG in refused.content.decode()
    assert too_long in refused.content.decode()
    assert signed_in.session[services.DISCARDED_KEY][0][2] == "mine 1"


def test_the_choices_need_a_csrf_token(user, conversation):
    _raced(conversation)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    editor = client.get(_url("artifact-edit", conversation, "report")).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', editor)[1]

    for choice in ("mine", "theirs", "merge"):
        assert _edit(client, conversation, base_version="2", choice=choice).status_code == 403
    asked = _edit(client, conversation, base_version="1", csrfmiddlewaretoken=token)
    assert asked.status_code == 409
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', asked.content.decode())[1]
    assert _edit(client, conversation, base_version="2", choice="mine", csrfmiddlewaretoken=token).status_code == 200


def test_an_upload_is_saved_at_once_under_a_safe_unique_name(signed_in, conversation):
    url = _url("artifact-pane", conversation)
    signed_in.post(url, {"file": SimpleUploadedFile("../../notes.md", b"# Notes\n")}, **HTMX)
    html = signed_in.post(url, {"file": SimpleUploadedFile("notes.md", b"# Other notes\n")}, **HTMX).content.decode()

    uploads = Artifact.objects.filter(session=conversation.artifact_session).order_by("id")
    assert [(a.artifact_id, a.source, a.current_version) for a in uploads] == [
        ("notes.md", "user_upload", 1),
        ("notes_1.md", "user_upload", 1),
    ]
    assert uploads[1].content == "# Other notes\n"
    assert "Other notes" in html


def test_an_oversize_upload_is_refused_with_a_clear_error(signed_in, conversation, settings):
    settings.ARTIFACT_UPLOAD_MAX_BYTES = 1000
    response = signed_in.post(
        _url("artifact-pane", conversation), {"file": SimpleUploadedFile("big.txt", b"x" * 1001)}, **HTMX
    )
    assert response.status_code == 422
    assert "This file is larger than the upload limit of 1000\xa0bytes." in response.content.decode()
    assert not Artifact.objects.exists()


def test_the_limit_is_stated_as_configured_and_told_to_the_browser(signed_in, conversation):
    html = signed_in.get(_url("artifact-pane", conversation), **HTMX).content.decode()
    # 20 MiB, the default, as the README states it: not "21 MB".
    assert 'data-max-bytes="20971520"' in html
    assert 'data-too-large="This file is larger than the upload limit of 20.0\xa0MB."' in html


def test_a_binary_upload_is_kept_as_a_file(signed_in, conversation):
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
    signed_in.post(_url("artifact-pane", conversation), {"file": SimpleUploadedFile("chart.png", png)}, **HTMX)

    artifact = Artifact.objects.get(artifact_id="chart.png")
    download = signed_in.get(_url("artifact-raw", conversation, "chart.png"))
    assert artifact.content_type == "image/png" and artifact.content == ""
    assert b"".join(download.streaming_content) == png
    assert signed_in.get(_url("artifact-edit", conversation, "chart.png")).status_code == 404


def test_the_docx_export_keeps_headings_lists_and_tables(signed_in, conversation):
    artifact = _flushed(conversation, "report", REPORT)
    conversation.owner.first_name, conversation.owner.last_name = "王", "小明"
    conversation.owner.save()

    response = signed_in.get(_url("artifact-export-docx", conversation, "report"))

    assert response["Content-Disposition"] == 'attachment; filename="report-v1.docx"'
    document = docx.Document(io.BytesIO(response.content))
    properties = document.core_properties
    assert (properties.author, properties.last_modified_by) == ("王 小明", "王 小明")
    assert properties.title == artifact.title != ""
    styled = [(p.style.name, p.text) for p in document.paragraphs]
    assert ("Heading 1", "Findings") in styled
    assert ("Heading 2", "Sources") in styled
    assert any(style.startswith("List Bullet") and text == "first" for style, text in styled)
    assert any(style == "List Bullet 2" and text == "nested" for style, text in styled)
    [table] = document.tables
    assert [cell.text for cell in table.rows[0].cells] == ["name", "value"]
    assert [cell.text for cell in table.rows[1].cells] == ["a", "1"]


def test_the_docx_export_says_which_version_it_is(signed_in, conversation):
    root = MessageFactory(conversation=conversation, content="热泵还是燃气？")
    other = MessageFactory(conversation=conversation, parent=root, content="太阳能呢？", shown=False)
    shown = MessageFactory(conversation=conversation, parent=root)
    report = Artifact.objects.create(session=conversation.artifact_session, artifact_id="报告.md", current_version=0)
    for number, message in ((1, root), (2, other), (3, shown)):
        artifact_version_save(
            artifact=report,
            content=f"# 报告 第{number}版\n",
            version=number,
            update_type="update",
            message_id=message.pk,
        )
    url = _url("artifact-export-docx", conversation, "报告.md")

    def exported(query=""):
        response = signed_in.get(url + query)
        subtitle = [
            p.text for p in docx.Document(io.BytesIO(response.content)).paragraphs if p.style.name == "Subtitle"
        ]
        return response["Content-Disposition"], subtitle

    assert exported() == (
        "attachment; filename*=utf-8''%E6%8A%A5%E5%91%8A.md-v3.docx",
        ["报告.md · version 2 on this branch (v3)"],
    )
    assert exported("?version=2") == (
        "attachment; filename*=utf-8''%E6%8A%A5%E5%91%8A.md-v2.docx",
        ["报告.md · v2 · other branch"],
    )


def test_the_raw_download_is_the_text_as_a_markdown_file(signed_in, conversation):
    _flushed(conversation, "report", REPORT)
    response = signed_in.get(_url("artifact-raw", conversation, "report"))
    assert response["Content-Disposition"] == 'attachment; filename="report.md"'
    assert response.content.decode() == REPORT


def test_during_a_run_the_pane_shows_work_in_progress_but_exports_only_what_was_saved(signed_in, conversation):
    run = RunFactory(message=MessageFactory(conversation=conversation), status=Run.Status.RUNNING)
    _flushed(conversation, "report", "saved text")
    manager = ArtifactManager(branch=branch_shown(conversation=conversation), run_id=run.pk)
    manager.rewrite(artifact_id="report", content="work in progress")
    manager.create(artifact_id="draft", content="brand new")

    detail = signed_in.get(_url("artifact-detail", conversation, "report"), **HTMX).content.decode()
    raw = signed_in.get(_url("artifact-raw", conversation, "report")).content.decode()

    assert "work in progress" in detail and "unsaved work of the running turn" in detail
    assert raw == "saved text"
    assert "brand new" in signed_in.get(_url("artifact-detail", conversation, "draft"), **HTMX).content.decode()
    assert signed_in.get(_url("artifact-export-docx", conversation, "draft")).status_code == 404


def test_a_non_ascii_name_downloads_under_its_own_name(signed_in, conversation):
    signed_in.post(
        _url("artifact-pane", conversation), {"file": SimpleUploadedFile("报告 最终.md", b"# Report\n")}, **HTMX
    )

    raw = signed_in.get(_url("artifact-raw", conversation, "报告_最终.md"))
    export = signed_in.get(_url("artifact-export-docx", conversation, "报告_最终.md"))

    # RFC 6266: the UTF-8 name in filename*, percent-encoded.
    assert raw["Content-Disposition"] == "attachment; filename*=utf-8''%E6%8A%A5%E5%91%8A_%E6%9C%80%E7%BB%88.md"
    assert (
        export["Content-Disposition"] == "attachment; filename*=utf-8''%E6%8A%A5%E5%91%8A_%E6%9C%80%E7%BB%88.md-v1.docx"
    )


def download_name(response) -> str:
    """The file name a browser saves the response under: filename* (RFC 6266, UTF-8) or filename."""
    disposition = response["Content-Disposition"]
    if extended := re.search(r"filename\*=utf-8''([^;\s]+)", disposition):
        return unquote(extended[1], errors="strict")
    return re.search(r'filename="((?:[^"\\]|\\.)*)"', disposition)[1]


@pytest.mark.parametrize(
    ("filename", "saved_as"),
    [
        # Would read "photoexe.png" with the override; an ASCII name goes in filename.
        ("photo\u202egnp.exe", "photognp.exe"),
        # A non-ASCII one in filename*: none of the percent-encoded controls (%E2%80%AE, %E2%80%8F…).
        ("报告\u200f\u061c\u2067最终\u2069\u200b\ufeff.pdf\u202e.exe", "报告最终.pdf.exe"),
    ],
)
def test_an_uploads_name_hides_and_reorders_nothing_in_the_pane_or_its_download(
    signed_in, conversation, filename, saved_as
):
    signed_in.post(_url("artifact-pane", conversation), {"file": SimpleUploadedFile(filename, b"MZ bytes")}, **HTMX)
    artifact = Artifact.objects.get(session=conversation.artifact_session)

    pane = signed_in.get(_url("artifact-detail", conversation, artifact.artifact_id), **HTMX).content.decode()
    download = signed_in.get(_url("artifact-raw", conversation, artifact.artifact_id))

    assert artifact.title == artifact.metadata["original_name"] == saved_as
    assert saved_as in pane and "\u202e" not in pane and "\u200f" not in pane
    assert download_name(download) == saved_as
    # A name stored before names were cleaned (or by a script) is cleaned on its way out.
    artifact.metadata["original_name"] = filename
    artifact.save()
    assert download_name(signed_in.get(_url("artifact-raw", conversation, artifact.artifact_id))) == saved_as


@pytest.mark.parametrize("name", ["upload", "diff", "edit", "raw", "export.docx"])
def test_an_artifact_named_like_a_route_is_still_that_artifact(signed_in, conversation, name):
    _flushed(conversation, name, f"# {name} notes\n")

    detail = signed_in.get(_url("artifact-detail", conversation, name), **HTMX)
    raw = signed_in.get(_url("artifact-raw", conversation, name))

    assert detail.status_code == 200 and f"{name} notes" in detail.content.decode()
    assert raw.content.decode() == f"# {name} notes\n"


def test_a_file_uploaded_as_upload_keeps_its_name_and_its_page(signed_in, conversation):
    url = _url("artifact-pane", conversation)
    signed_in.post(url, {"file": SimpleUploadedFile("upload", b"\x00raw bytes")}, **HTMX)

    artifact = Artifact.objects.get(session=conversation.artifact_session)
    detail = signed_in.get(_url("artifact-detail", conversation, "upload"), **HTMX)
    raw = signed_in.get(_url("artifact-raw", conversation, "upload"))

    assert artifact.artifact_id == "upload"
    assert detail.status_code == 200 and "<code>upload</code>" in detail.content.decode()
    assert b"".join(raw.streaming_content) == b"\x00raw bytes"


def test_with_redis_down_the_pane_answers_from_what_was_saved(disposable_redis, signed_in, conversation, other_user):
    run = RunFactory(message=MessageFactory(conversation=conversation), status=Run.Status.RUNNING)
    saved = _flushed(conversation, "report", "saved text")
    # Published while Redis was up, lost with it.
    ArtifactManager(branch=branch_shown(conversation=conversation), run_id=run.pk).rewrite(
        artifact_id="report", content="work in progress"
    )
    theirs = ConversationFactory(owner=other_user)
    _flushed(theirs, "report", "secret")
    disposable_redis.kill()

    pane = signed_in.get(_url("artifact-pane", conversation), **HTMX)
    detail = signed_in.get(_url("artifact-detail", conversation, "report"), **HTMX)
    form = signed_in.get(_url("artifact-edit", conversation, "report"), **HTMX)
    edited = signed_in.post(
        _url("artifact-edit", conversation, "report"),
        {"content": "my text", "base_version": saved.current_version},
        **HTMX,
    )
    uploaded = signed_in.post(
        _url("artifact-pane", conversation), {"file": SimpleUploadedFile("notes.md", b"# Notes\n")}, **HTMX
    )

    assert [r.status_code for r in (pane, detail, form, edited, uploaded)] == [200] * 5
    assert "saved text" in detail.content.decode() and "work in progress" not in detail.content.decode()
    assert "my text" in edited.content.decode() and "Notes" in uploaded.content.decode()
    assert signed_in.get(_url("artifact-pane", theirs), **HTMX).status_code == 404
    assert signed_in.get(_url("artifact-detail", theirs, "report"), **HTMX).status_code == 404


def test_word_and_pdf_uploads_are_converted_into_the_pane(signed_in, conversation):
    document = docx.Document()
    document.add_heading("研究", level=1)
    document.add_paragraph("first point", style="List Bullet")
    buffer = io.BytesIO()
    document.save(buffer)
    url = _url("artifact-pane", conversation)

    word = signed_in.post(url, {"file": SimpleUploadedFile("study.docx", buffer.getvalue())}, **HTMX)
    pdf = signed_in.post(url, {"file": SimpleUploadedFile("paper.pdf", pdf_bytes(["Page one", "Page two"]))}, **HTMX)

    assert (word.status_code, pdf.status_code) == (200, 200)
    assert [(a.artifact_id, a.content_type, a.content) for a in Artifact.objects.order_by("id")] == [
        ("study.docx", "text/markdown", "# 研究\n\n- first point"),
        ("paper.pdf", "text/plain", "Page one\n\nPage two"),
    ]
    assert "<h1>研究</h1>" in word.content.decode() and "Page two" in pdf.content.decode()


def test_a_refused_upload_replaces_its_message_alone_so_the_pane_keeps_what_was_in_it(signed_in, conversation):
    # 10 MB of XML in a 60 KB Word document.
    bomb = docx_of_xml(b"<w:p><w:r><w:t>x</w:t></w:r></w:p>", repeat=300_000)

    response = signed_in.post(
        _url("artifact-pane", conversation), {"file": SimpleUploadedFile("bomb.docx", bomb)}, **HTMX
    )

    html = response.content.decode()
    assert response.status_code == 422
    assert (response["HX-Retarget"], response["HX-Reswap"]) == ("#upload-error", "outerHTML show:bottom")
    assert html.strip().startswith('<p id="upload-error" class="error" role="alert">')
    assert "This Word document unpacks to too much data to read. Split it into smaller documents" in html
    assert "artifact-list" not in html
    assert not Artifact.objects.exists()


def test_without_htmx_a_refused_upload_shows_the_pane_with_its_message(signed_in, conversation):
    response = signed_in.post(_url("artifact-pane", conversation), {"file": SimpleUploadedFile("empty.pdf", b"")})

    assert response.status_code == 422
    assert "Could not read this PDF" in response.content.decode() and "artifact-list" in response.content.decode()


def test_the_upload_form_says_it_is_converting_while_its_request_runs(signed_in, conversation):
    html = signed_in.get(_url("artifact-pane", conversation), **HTMX).content.decode()

    assert '<p class="upload-progress" role="status">Converting <span data-upload-name>the file</span>…</p>' in html
    assert 'hx-disabled-elt="find input[type=file], find button"' in html


def _threads_held_by_the_request() -> list[str]:
    """Threads running the upload's code, or waiting for the event loop to
    finish the request for them (asgiref's async_to_sync)."""
    ours = ("artifacts/views.py", "artifacts/uploads.py", "artifactflow/extraction.py", "artifactflow/documents.py")
    frames = sys._current_frames()

    def holding(frame) -> bool:
        return frame.filename.endswith(ours) or (
            frame.filename.endswith("asgiref/sync.py") and frame.name == "__call__"
        )

    return [
        thread.name
        for thread in threading.enumerate()
        if thread is not threading.main_thread() and any(map(holding, traceback.extract_stack(frames[thread.ident])))
    ]


def _reading_children() -> list[int]:
    return [
        int(pid)
        for children in Path("/proc/self/task").glob("*/children")
        for pid in children.read_text().split()
        if Path(f"/proc/{pid}").exists() and b"artifactflow.extraction" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]


# Three pages drawing one 2.8 MB stream: under every size limit, some 20 s of parsing.
SLOW_PDF = pdf_sharing_one_stream(pages=3, content=b"0 0 m 1 1 l S\n" * 200_000)


async def _upload_begun(signed_in, conversation, *, name: str, data: bytes) -> ApplicationCommunicator:
    """An upload through the whole ASGI application, once its document is being read."""
    body = encode_multipart(BOUNDARY, {"file": SimpleUploadedFile(name, data)})
    token = "a" * 32
    headers = [
        (b"content-type", MULTIPART_CONTENT.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"cookie", f"sessionid={signed_in.cookies['sessionid'].value}; csrftoken={token}".encode()),
        (b"x-csrftoken", token.encode()),
        (b"hx-request", b"true"),
    ]
    upload = ApplicationCommunicator(application, http_scope(path=_url("artifact-pane", conversation), headers=headers))
    await upload.send_input({"type": "http.request", "body": body})
    deadline = time.monotonic() + 15
    while not _reading_children():
        assert time.monotonic() < deadline, "the document was never read in a child process"
        await asyncio.sleep(0.01)
    return upload


@pytest.mark.django_db(transaction=True)
async def test_while_an_upload_is_read_no_thread_waits_for_it(signed_in, conversation, settings):
    settings.EXTRACT_TIMEOUT = 3
    upload = await _upload_begun(signed_in, conversation, name="slow.pdf", data=SLOW_PDF)

    held = _threads_held_by_the_request()
    start = await upload.receive_output(timeout=15)
    answer = await upload.receive_output(timeout=5)

    assert held == []
    assert start["status"] == 422
    assert "This PDF took too long to read (over 3 seconds)." in answer["body"].decode()


@pytest.mark.django_db(transaction=True)
async def test_an_upload_left_while_it_is_read_stops_its_reading(signed_in, conversation):
    upload = await _upload_begun(signed_in, conversation, name="slow.pdf", data=SLOW_PDF)

    await upload.send_input({"type": "http.disconnect"})
    await upload.wait(timeout=15)

    assert _reading_children() == []
    assert not await Artifact.objects.aexists()


MCSCHEMA_FENCE = "```mcschema\n<!--\n```\n"


def test_a_fence_or_type_whose_lexer_never_ends_does_not_hold_the_upload_preview_or_pane(signed_in, conversation):
    """The probe's 30-byte upload, preview and content type each spun a thread for good."""
    pane = _url("artifact-pane", conversation)
    with finishes_within(30):
        upload = signed_in.post(pane, {"file": SimpleUploadedFile("hang.md", MCSCHEMA_FENCE.encode())}, **HTMX)
        _flushed(conversation, "schema", "<!-- never closed", content_type="text/mcschema")
        preview = signed_in.post(_url("artifact-preview", conversation, "hang.md"), {"content": MCSCHEMA_FENCE})
        schema = signed_in.get(_url("artifact-detail", conversation, "schema"), **HTMX)

    assert upload.status_code == preview.status_code == schema.status_code == 200
    assert "<pre><code>&lt;!--\n</code></pre>" in upload.content.decode()
    assert "<pre><code>&lt;!--\n</code></pre>" in preview.content.decode()
    assert '<pre class="plain">&lt;!-- never closed</pre>' in schema.content.decode()


def test_a_preview_past_the_render_bound_shows_its_text_plain(signed_in, conversation, monkeypatch):
    monkeypatch.setattr(markdown, "RENDER_MAX_CHARS", 1_000)
    _flushed(conversation, "report", REPORT)
    text = "# 报告\n\n" + "[" * 2_000

    preview = signed_in.post(_url("artifact-preview", conversation, "report"), {"content": text}, **HTMX)

    assert preview.status_code == 200
    assert "Too long to format: shown as plain text." in preview.content.decode()
    assert f'<pre class="unformatted"># 报告\n\n{"[" * 2_000}</pre>' in preview.content.decode()


def test_a_stored_id_no_url_can_name_leaves_the_page_and_pane_working(signed_in, conversation):
    """The probe's "report\n", saved around the tools' check, made both a 500 on every load."""
    _flushed(conversation, "notes", "# Notes")
    ArtifactFactory(session=conversation.artifact_session, artifact_id="report\n", content="# Hidden")

    page = signed_in.get(reverse("conversation-detail", args=[conversation.pk]))
    pane = signed_in.get(_url("artifact-pane", conversation), **HTMX)

    assert page.status_code == pane.status_code == 200
    assert "notes" in pane.content.decode() and "Hidden" not in pane.content.decode()


def test_the_migration_renames_ids_and_repairs_titles_and_types_that_break_pages(conversation):
    session = conversation.artifact_session
    ArtifactFactory(session=session, artifact_id="report")
    broken = ArtifactFactory(session=session, artifact_id="report\n", title="Line\none", content_type="text/x\r\nX: 1")
    odd = ArtifactFactory(session=session, artifact_id="..报告 (final)?", content_type="text/markdown")
    odd.versions.update(title="第一\r\n版")

    import_module("artifacts.migrations.0004_metadata_validated").metadata_repair(apps, None)

    broken.refresh_from_db()
    odd.refresh_from_db()
    assert (broken.artifact_id, broken.title, broken.content_type) == ("report_1", "Line one", "text/plain")
    assert (odd.artifact_id, odd.content_type) == ("报告_final", "text/markdown")
    assert list(odd.versions.values_list("title", flat=True)) == ["第一 版"]


@pytest.mark.parametrize(
    ("filename", "data"),
    [
        ("evil.js", b"alert(document.cookie)"),
        ("evil.mjs", b"export default 1; alert(1)"),
        ("evil.html", b"<script>alert(1)</script>"),
        ("evil.svg", b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'),
        ("evil.xhtml", b'<html xmlns="http://www.w3.org/1999/xhtml"><script>alert(1)</script></html>'),
        ("evil.bin", b"alert(1)"),
    ],
)
def test_no_artifact_url_serves_an_upload_as_script_or_page(signed_in, conversation, filename, data):
    """Served inline as its own type, an upload would count as the site's own script under the CSP."""
    upload = SimpleUploadedFile(filename, data, content_type="application/javascript")
    signed_in.post(_url("artifact-pane", conversation), {"file": upload}, **HTMX)
    [artifact] = Artifact.objects.all()
    urls = [_url(name, conversation, artifact.artifact_id) for name in ("artifact-raw", "artifact-export-docx")]
    urls += [_url("artifact-raw", conversation, artifact.artifact_id) + "?original=1"]
    if artifact.is_text:
        urls += [_url("artifact-detail", conversation, artifact.artifact_id)]

    for url in urls:
        response = signed_in.get(url)
        served = response["Content-Type"].split(";")[0]
        assert response.status_code == 200, url
        assert served in ("text/plain", "application/octet-stream", "text/html", DOCX_TYPE), url
        assert response["X-Content-Type-Options"] == "nosniff"
        if served == "text/html":
            # The portal's own pages, which show the upload escaped.
            assert "<script>alert" not in response.content.decode() and "onload=" not in response.content.decode()
        else:
            assert response["Content-Disposition"].startswith("attachment")
        if "raw" in url:
            assert response["Content-Security-Policy"] == "sandbox; default-src 'none'"


def test_a_content_type_with_a_line_break_still_downloads(signed_in, conversation):
    ArtifactFactory(session=conversation.artifact_session, artifact_id="notes", content_type="text/x\r\nX-Injected: 1")

    response = signed_in.get(_url("artifact-raw", conversation, "notes"))

    assert response.status_code == 200 and response["Content-Type"] == "text/plain; charset=utf-8"
    assert "X-Injected" not in response


def _saved_over(conversation, *, kind, writer="agent"):
    """The person's edit v2 of the report, and an agents' save v3 over it, marked as the manager marks it."""
    artifact = _flushed(conversation, "report", "# 报告\n\n第一稿。\n")
    branch = branch_shown(conversation=conversation)
    services.artifact_edit(branch=branch, artifact=artifact, content=MINE, base_version=1)
    artifact.refresh_from_db()
    artifact_version_save(
        artifact=artifact,
        content=THEIRS,
        version=3,
        update_type="rewrite",
        message_id=branch.leaf_id,
        conflict_writer=writer,
        conflict_kind=kind,
        overlapped=2,
    )
    return artifact


@pytest.mark.parametrize(
    ("kind", "told"),
    [
        (
            "overlap",
            "The agents saved version 3 on this branch (v3) over your edit, version 2 on this branch (v2),"
            " made while the turn ran.",
        ),
        (
            "dropped",
            "The agents’ version 3 on this branch (v3) left out text you wrote in version 2 on this branch (v2).",
        ),
    ],
)
def test_an_agents_save_over_a_persons_text_is_told_with_the_diff_and_restore(signed_in, conversation, kind, told):
    _saved_over(conversation, kind=kind)

    html = signed_in.get(_url("artifact-pane", conversation), **HTMX).content.decode()

    assert told in html
    assert "Changes from version 2 on this branch (v2) to version 3 on this branch (v3)" in html
    assert '<span class="diff-sign">-</span>我的补充：地源热泵更贵。</div>' in html
    assert "Restore my text" in html and "Keep the agents’ version" in html
    assert "saved over your text" in html  # in the list too


def test_restore_my_text_brings_the_persons_version_back_on_top(signed_in, conversation):
    artifact = _saved_over(conversation, kind="overlap")
    html = signed_in.get(_url("artifact-detail", conversation, "report"), **HTMX).content.decode()
    form = html[html.index('id="saved-over"') :]
    version = re.search(r'name="version" value="(\d+)"', form)[1]
    base = re.search(r'name="base_version" value="(\d+)"', form)[1]

    restored = signed_in.post(
        _url("artifact-restore", conversation, "report"), {"version": version, "base_version": base}, **HTMX
    ).content.decode()

    assert _contents(artifact)[-1] == MINE and artifact.versions.get(version=4).update_type == "restore"
    assert "The agents saved" not in restored and "saved over your text" not in restored


def test_keep_the_agents_version_clears_the_marker(signed_in, conversation):
    artifact = _saved_over(conversation, kind="dropped")

    kept = signed_in.post(_url("artifact-conflict-dismiss", conversation, "report"), {"version": "3"}, **HTMX)

    artifact.refresh_from_db()
    assert kept.status_code == 200 and "conflict" not in artifact.metadata
    assert "left out text" not in kept.content.decode() and _contents(artifact)[-1] == THEIRS


def test_keep_the_agents_version_needs_a_csrf_token(user, conversation):
    artifact = _saved_over(conversation, kind="overlap")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    refused = client.post(_url("artifact-conflict-dismiss", conversation, "report"), {"version": "3"})

    artifact.refresh_from_db()
    assert refused.status_code == 403 and "conflict" in artifact.metadata


def test_an_old_marker_of_a_users_save_still_reads_sensibly(signed_in, conversation):
    _saved_over(conversation, kind="", writer="user")

    html = signed_in.get(_url("artifact-detail", conversation, "report"), **HTMX).content.decode()

    assert (
        "Version 3 on this branch (v3) was saved over version 2 on this branch (v2), which changed at the same time."
        in html
    )
    assert "Restore my text" not in html and "saved over your text" not in html
