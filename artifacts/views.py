from django.core.exceptions import ValidationError
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import render
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_http_methods

from artifactflow.ids import id_from_text

from . import selectors, services
from .export import docx_from_markdown
from .uploads import UploadError

PANE = "artifacts/pane.html"


def _session_or_404(request, conversation_id):
    session = selectors.artifact_session_get(user=request.user, conversation_id=conversation_id)
    if session is None:
        raise Http404("No such conversation.")
    return session


def _artifact_or_404(session, artifact_id):
    view = selectors.artifact_get(session=session, artifact_id=artifact_id)
    if view is None:
        raise Http404("No such artifact.")
    return view


def _saved_or_404(session, artifact_id):
    """Versions, diffs and exports read what was saved, never a working copy."""
    view = _artifact_or_404(session, artifact_id)
    if view.saved is None:
        raise Http404("This artifact is not saved yet; it will be when the turn ends.")
    return view.saved


def _version_number(request, name):
    return id_from_text(request.GET.get(name, ""))


def _pane(request, session, *, selected=None, version=None, status=200, **extra):
    context = {**selectors.pane_context(session=session, selected=selected, version=version), **extra}
    template = f"{PANE}#pane" if request.htmx else PANE
    return render(request, template, context, status=status)


@require_http_methods(["GET", "POST"])
def artifact_pane(request, conversation_id):
    """The pane; a POST uploads a file into it."""
    session = _session_or_404(request, conversation_id)
    if request.method == "POST":
        return _upload(request, session)
    return _pane(request, session)


@require_GET
def artifact_detail(request, conversation_id, artifact_id):
    session = _session_or_404(request, conversation_id)
    selected = _artifact_or_404(session, artifact_id)
    number = _version_number(request, "version")
    version = None
    if number is not None:
        version = selectors.artifact_version_get(artifact=_saved_or_404(session, artifact_id), version=number)
        if version is None:
            raise Http404("No such version.")
    return _pane(request, session, selected=selected, version=version)


@require_GET
def artifact_diff(request, conversation_id, artifact_id):
    session = _session_or_404(request, conversation_id)
    artifact = _saved_or_404(session, artifact_id)
    numbers = (_version_number(request, "from"), _version_number(request, "to"))
    old, new = (selectors.artifact_version_get(artifact=artifact, version=n) if n else None for n in numbers)
    if old is None or new is None:
        raise Http404("Choose two saved versions to compare.")
    lines = selectors.artifact_diff(
        old=old.content, new=new.content, old_label=f"v{old.version}", new_label=f"v{new.version}"
    )
    return _pane(
        request, session, selected=_artifact_or_404(session, artifact_id), diff={"old": old, "new": new, "lines": lines}
    )


@require_http_methods(["GET", "POST"])
def artifact_edit(request, conversation_id, artifact_id):
    session = _session_or_404(request, conversation_id)
    artifact = _saved_or_404(session, artifact_id)
    if not artifact.is_text:
        raise Http404("A binary file cannot be edited here.")
    selected = _artifact_or_404(session, artifact_id)
    if request.method == "GET":
        return _pane(request, session, selected=selected, editing=artifact)
    lock = id_from_text(request.POST.get("lock_version", ""))
    if lock is None:
        return _pane(request, session, selected=selected, editing=artifact, edit_error="The form is out of date; reload it.", status=422)
    try:
        _, conflicted = services.artifact_edit(
            artifact=artifact, content=request.POST.get("content", "").replace("\r\n", "\n"), expected_lock_version=lock
        )
    except ValidationError as exc:
        return _pane(request, session, selected=selected, editing=artifact, edit_error=exc.messages[0], status=422)
    return _pane(request, session, selected=_artifact_or_404(session, artifact_id), saved_conflict=conflicted)


def _upload(request, session):
    upload = request.FILES.get("file")
    if upload is None:
        return _pane(request, session, upload_error="Choose a file to upload.", status=422)
    try:
        services.artifact_upload_check(size=upload.size)
        artifact = services.artifact_upload(
            session=session, filename=upload.name, data=upload.read(), content_type=upload.content_type or ""
        )
    except UploadError as exc:
        return _pane(request, session, upload_error=str(exc), status=422)
    return _pane(request, session, selected=_artifact_or_404(session, artifact.artifact_id))


def _download_name(artifact, extension):
    name = artifact.artifact_id
    return name if name.lower().endswith(extension) else name + extension


@require_GET
def artifact_export_docx(request, conversation_id, artifact_id):
    session = _session_or_404(request, conversation_id)
    artifact = _saved_or_404(session, artifact_id)
    number = _version_number(request, "version")
    version = selectors.artifact_version_get(artifact=artifact, version=number) if number else None
    content = version.content if version else artifact.content
    data = docx_from_markdown(markdown=content, title=artifact.title)
    response = HttpResponse(data, content_type="application/vnd.openxmlformats-officedocument.wordprocessingml.document")
    response["Content-Disposition"] = content_disposition_header(True, _download_name(artifact, ".docx"))
    return response


@require_GET
def artifact_raw(request, conversation_id, artifact_id):
    """The text as a file (.md for markdown), or the uploaded file itself."""
    session = _session_or_404(request, conversation_id)
    artifact = _saved_or_404(session, artifact_id)
    if request.GET.get("original") or not artifact.is_text:
        if not artifact.file:
            raise Http404("This artifact has no uploaded original.")
        return FileResponse(
            artifact.file.open("rb"), as_attachment=True, filename=artifact.metadata.get("original_name") or artifact.artifact_id,
            content_type=artifact.content_type,
        )
    extension = ".md" if artifact.content_type == "text/markdown" else ""
    response = HttpResponse(artifact.content, content_type=f"{artifact.content_type}; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, _download_name(artifact, extension))
    response["X-Content-Type-Options"] = "nosniff"
    return response
