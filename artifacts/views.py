from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import render
from django.utils.http import content_disposition_header
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import push_url, reswap, retarget

from agents.selectors import branch_shown_live
from artifactflow.ids import id_from_text
from artifactflow.names import name_clean
from audit.models import AuditEvent
from audit.services import audit_record
from conversations.selectors import conversation_get, conversation_viewable

from . import paging, pane, selectors, services
from .conversation_export import user_display_name
from .export import docx_from_markdown
from .uploads import UploadError, convert_upload_async

PANE = "artifacts/pane.html"
# Uploaded files served as their own type: none of them a browser runs as script or page.
INERT_TYPES = frozenset(
    {
        "application/pdf",
        "application/zip",
        "application/gzip",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "audio/mpeg",
        "video/mp4",
    }
)
# The pane element's id: its own requests are its refreshes (hx-get on the pane).
PANE_ID = "artifact-pane"


def _branch_or_404(request, conversation_id):
    """The branch the conversation's page shows, over its turns' working
    copies: every view here works on its artifacts."""
    conversation = conversation_get(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation.")
    return branch_shown_live(conversation=conversation)


def _readable_branch_or_404(request, conversation_id):
    """The branch the conversation's page shows, for reading: the owner's, or
    one shared with the user, who reads it without the controls that change
    it (`read_only`). Every view that changes artifacts uses _branch_or_404."""
    conversation = conversation_viewable(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation.")
    return branch_shown_live(conversation=conversation), conversation.owner_id != request.user.pk


def _artifact_or_404(branch, artifact_id):
    view = selectors.artifact_get(branch=branch, artifact_id=artifact_id)
    if view is None:
        raise Http404("No such artifact on this branch.")
    return view


def _saved_or_404(branch, artifact_id):
    """Versions, diffs and exports read what was saved, never a working copy."""
    view = _artifact_or_404(branch, artifact_id)
    if view.saved is None:
        raise Http404("This artifact is not saved yet; it will be when the turn ends.")
    return view


def _version_number(request, name):
    return id_from_text(request.GET.get(name, ""))


def _version_or_404(artifact, number):
    version = selectors.artifact_version_get(artifact=artifact, version=number) if number is not None else None
    if version is None:
        raise Http404("No such version.")
    return version


def _pane(
    request,
    branch,
    *,
    selected=None,
    version=None,
    diff=None,
    restored=None,
    conflict=None,
    merging=None,
    status=200,
    push=True,
    **extra,
):
    shown_pane = pane.pane_context(
        branch=branch,
        selected=selected,
        version=version,
        diff=diff,
        restored=restored,
        conflict=conflict,
        merging=merging,
    )
    context = {**shown_pane, **extra}
    shown = context["selected"]
    if shown is not None and not context.get("read_only"):
        # A text the person discarded in a conflict, theirs to take back while the session keeps it.
        context["discarded"] = _discarded(request, branch, shown.artifact_id)
    template = f"{PANE}#pane" if request.htmx else PANE
    response = render(request, template, context, status=status)
    # The conversation page's URL says what the pane shows, so that a reload,
    # a link sent to a colleague and Back show it again. The editor and an
    # error are passing states, not places to go back to. The pane's own
    # refresh (its trigger is the pane) follows what the page shows: it never
    # moves the address the user is at.
    moves = request.htmx and push and status == 200 and request.htmx.trigger != PANE_ID
    if moves and context["page_url"] != request.htmx.current_url_abs_path:
        push_url(response, context["page_url"])
    return response


@require_http_methods(["GET", "POST"])
async def artifact_pane(request, conversation_id):
    """The pane; a POST uploads a file into it. Async, so that no thread waits
    while an uploaded document is read (in a child process); the database
    work runs in the request's thread as in any view."""
    if request.method == "POST":
        return await _upload(request, conversation_id)
    return await sync_to_async(_pane_shown)(request, conversation_id)


def _pane_shown(request, conversation_id):
    branch, read_only = _readable_branch_or_404(request, conversation_id)
    return _pane(request, branch, read_only=read_only)


@require_GET
def artifact_detail(request, conversation_id, artifact_id):
    branch, read_only = _readable_branch_or_404(request, conversation_id)
    selected = _artifact_or_404(branch, artifact_id)
    number = _version_number(request, "version")
    version = None if number is None else _version_or_404(_saved_or_404(branch, artifact_id).saved, number)
    return _pane(request, branch, selected=selected, version=version, read_only=read_only)


@require_GET
def artifact_diff(request, conversation_id, artifact_id):
    branch, read_only = _readable_branch_or_404(request, conversation_id)
    selected = _saved_or_404(branch, artifact_id)
    diff = pane.artifact_compare(
        artifact=selected.saved,
        old_version=_version_number(request, "from"),
        new_version=_version_number(request, "to"),
    )
    if diff is None:
        raise Http404("Choose two saved versions to compare.")
    return _pane(request, branch, selected=selected, diff=diff, read_only=read_only)


@require_GET
def artifact_page(request, conversation_id, artifact_id):
    """The page of a long text from `?start=` on, in `?version=`: what "Show
    more" appends below the pages shown. Without `start`, the first page."""
    branch, _ = _readable_branch_or_404(request, conversation_id)
    selected = _saved_or_404(branch, artifact_id)
    version, start = _version_number(request, "version"), id_from_text(request.GET.get("start", "0"))
    page = (
        paging.version_page(artifact=selected.saved, version=version, start=start)
        if version is not None and start is not None
        else None
    )
    if page is None:
        raise Http404("No such page.")
    context = {"conversation_id": branch.session.pk, **pane.page_context(selected=selected, page=page, version=version)}
    return render(request, f"{PANE}#text_page", context)


def _text_or_404(branch, artifact_id):
    selected = _saved_or_404(branch, artifact_id)
    if not selected.is_text:
        raise Http404("A binary file cannot be edited here.")
    return selected


@require_http_methods(["GET", "POST"])
def artifact_edit(request, conversation_id, artifact_id):
    """The editor, on the branch's text, with `?version=` on that version's,
    or with `?recover=1` on the text the person discarded in a conflict:
    saving any makes a new version on the branch. An edit the branch moved on
    from meanwhile saves nothing; the person chooses (`choice`): keep mine,
    keep theirs, or merge them by hand."""
    branch = _branch_or_404(request, conversation_id)
    selected = _text_or_404(branch, artifact_id)
    if request.method == "GET":
        number = _version_number(request, "version")
        version = None if number is None else _version_or_404(selected.saved, number)
        text = version.content if version else selected.head.content
        if request.GET.get("recover"):
            text = _discarded(request, branch, artifact_id)
            if text is None:
                raise Http404("The text you discarded is no longer kept.")
        return _pane(request, branch, selected=selected, version=version, push=False, editing=True, edit_text=text)
    content = request.POST.get("content", "").replace("\r\n", "\n")
    base = id_from_text(request.POST.get("base_version", ""))
    # A refused edit keeps the text typed, to fix and save again.
    refused = {"selected": selected, "editing": True, "edit_text": content, "status": 422}
    if base is None:
        return _pane(request, branch, **refused, edit_error=gettext("The form is out of date; reload it."))
    choice = request.POST.get("choice", "")
    if choice in ("theirs", "merge"):
        theirs = _version_or_404(selected.saved, base)
        if choice == "merge":
            return _pane(request, branch, **{**refused, "status": 200}, push=False, merging=theirs)
        try:
            services.discarded_keep(
                session=request.session, conversation_id=branch.session.pk, artifact_id=artifact_id, text=content
            )
        except ValidationError as exc:
            conflict = pane.edit_conflict(theirs=theirs, mine=content)
            return _pane(request, branch, **refused, conflict=conflict, edit_error=exc.messages[0])
        return _pane(
            request, branch, selected=selected, pane_notice=gettext("Your text was discarded; theirs is current.")
        )
    try:
        services.artifact_edit(branch=branch, artifact=selected.saved, content=content, base_version=base)
    except services.ChangedMeanwhile as exc:
        conflict = pane.edit_conflict(theirs=exc.theirs, mine=content)
        return _pane(request, branch, **{**refused, "status": 409}, conflict=conflict)
    except ValidationError as exc:
        return _pane(request, branch, **refused, edit_error=exc.messages[0])
    services.discarded_drop(session=request.session, conversation_id=branch.session.pk, artifact_id=artifact_id)
    return _pane(request, branch, selected=_artifact_or_404(branch, artifact_id))


def _discarded(request, branch, artifact_id):
    return services.discarded_get(session=request.session, conversation_id=branch.session.pk, artifact_id=artifact_id)


@require_POST
def artifact_preview(request, conversation_id, artifact_id):
    """The editor's text rendered as the pane will show it once saved."""
    branch = _branch_or_404(request, conversation_id)
    selected = _text_or_404(branch, artifact_id)
    text = request.POST.get("content", "").replace("\r\n", "\n")
    return render(
        request, f"{PANE}#edit_preview", {"previewing": True, "text": text, "content_type": selected.content_type}
    )


@require_POST
def artifact_restore(request, conversation_id, artifact_id):
    """Makes the version shown (this branch's or another's) the branch's
    current text again, as a new version. If the branch moved on from the
    version the page showed, nothing is saved: the person chooses, as for an edit."""
    branch = _branch_or_404(request, conversation_id)
    selected = _text_or_404(branch, artifact_id)
    version = _version_or_404(selected.saved, id_from_text(request.POST.get("version", "")))
    base = id_from_text(request.POST.get("base_version", ""))
    if base is None:
        return _pane(
            request,
            branch,
            selected=selected,
            version=version,
            status=422,
            restore_error=gettext("The page is out of date; reload it."),
        )
    try:
        restored = services.artifact_restore(branch=branch, version=version, base_version=base)
    except services.ChangedMeanwhile as exc:
        conflict = pane.edit_conflict(theirs=exc.theirs, mine=version.content, restoring=version)
        return _pane(
            request, branch, selected=selected, conflict=conflict, editing=True, edit_text=version.content, status=409
        )
    return _pane(
        request,
        branch,
        selected=_artifact_or_404(branch, artifact_id),
        restored=(version.version, restored.version),
    )


@require_POST
def artifact_conflict_dismiss(request, conversation_id, artifact_id):
    """Keeps the agents' version that was saved over the person's text: the pane stops asking."""
    branch = _branch_or_404(request, conversation_id)
    selected = _saved_or_404(branch, artifact_id)
    number = id_from_text(request.POST.get("version", ""))
    if number is not None:
        services.artifact_conflict_dismiss(artifact=selected.saved, version=number)
    return _pane(request, branch, selected=_artifact_or_404(branch, artifact_id))


@require_http_methods(["GET", "POST"])
def artifact_delete(request, conversation_id, artifact_id):
    """GET asks to confirm; POST deletes the artifact on every branch."""
    branch = _branch_or_404(request, conversation_id)
    selected = _saved_or_404(branch, artifact_id)
    if request.method == "GET":
        return _pane(
            request,
            branch,
            selected=selected,
            push=False,
            deleting=selectors.artifact_delete_scope(artifact=selected.saved, branch=branch),
        )
    try:
        services.artifact_delete(artifact=selected.saved, active_runs=branch.active_runs)
    except ValidationError as exc:
        return _pane(request, branch, selected=selected, status=409, delete_error=exc.messages[0])
    notice = gettext("Deleted %(title)s.") % {"title": selected.title or selected.artifact_id}
    return _pane(request, branch, pane_notice=notice)


async def _upload(request, conversation_id):
    branch = await sync_to_async(_branch_or_404)(request, conversation_id)
    try:
        filename, data, content_type = await sync_to_async(_upload_read)(request)
        converted = await convert_upload_async(filename=filename, data=data, content_type=content_type)
        artifact = await sync_to_async(services.artifact_upload_save)(
            branch=branch, filename=filename, data=data, converted=converted
        )
    except UploadError as exc:
        return await sync_to_async(_upload_refused)(request, branch, message=str(exc))
    return await sync_to_async(_upload_shown)(request, branch, artifact_id=artifact.artifact_id)


def _upload_read(request) -> tuple[str, bytes, str]:
    upload = request.FILES.get("file")
    if upload is None:
        raise UploadError(gettext("Choose a file to upload."))
    services.artifact_upload_check(size=upload.size)
    return upload.name, upload.read(), upload.content_type or ""


def _upload_refused(request, branch, *, message):
    """The refusal replaces the upload's message alone: the rest of the pane,
    an editor's unsaved text too, stays as the person left it."""
    if not request.htmx:
        return _pane(request, branch, upload_error=message, status=422)
    response = render(request, f"{PANE}#upload_error", {"upload_error": message}, status=422)
    return reswap(retarget(response, "#upload-error"), "outerHTML show:bottom")


def _upload_shown(request, branch, *, artifact_id):
    return _pane(request, branch, selected=_artifact_or_404(branch, artifact_id))


def _download_name(artifact, extension, *, version=None):
    """The artifact's id as a file name, with the artifact's number of the
    version in it when given: the one version name that never changes."""
    # An id is letters, digits, "_", "-" and "." unless a script wrote it around the validators.
    name = name_clean(artifact.artifact_id)
    if extension and name.lower().endswith(extension):
        name = name[: -len(extension)]
    return f"{name}-v{version}{extension}" if version else name + extension


@require_GET
def artifact_export_docx(request, conversation_id, artifact_id):
    """The branch's text, or with `?version=` that version's, as a Word document
    that says which version it is, as the pane names it."""
    branch, _ = _readable_branch_or_404(request, conversation_id)
    selected = _saved_or_404(branch, artifact_id)
    number = _version_number(request, "version")
    version = selected.head if number is None else _version_or_404(selected.saved, number)
    name = selectors.version_names(artifact=selected.saved, branch=branch)[version.version]
    data = docx_from_markdown(
        markdown=version.content,
        title=selected.title,
        subtitle=f"{selected.artifact_id} · {name}",
        author=user_display_name(request.user),
    )
    response = HttpResponse(
        data, content_type="application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    )
    filename = _download_name(selected, ".docx", version=version.version)
    response["Content-Disposition"] = content_disposition_header(True, filename)
    audit_record(action=AuditEvent.Action.EXPORT, obj=selected.saved, detail={"as": "docx", "version": version.version})
    return response


@require_GET
def artifact_raw(request, conversation_id, artifact_id):
    """The branch's text as a file (.md for markdown), or the uploaded file itself.

    Always a download, of a type no browser runs: text as text/plain and a
    file as its own type only when that is one a page cannot execute (an
    uploaded .js or .svg as script would count as the site's own under the
    Content-Security-Policy), with nosniff and a sandbox besides."""
    branch, _ = _readable_branch_or_404(request, conversation_id)
    selected = _saved_or_404(branch, artifact_id)
    artifact = selected.saved
    if request.GET.get("original") or not selected.is_text:
        if not artifact.file:
            raise Http404("This artifact has no uploaded original.")
        response = FileResponse(
            artifact.file.open("rb"),
            as_attachment=True,
            # Cleaned here too, whatever wrote the row (the admin's metadata field, a script).
            filename=name_clean(artifact.metadata.get("original_name") or artifact.artifact_id),
            content_type=artifact.content_type if artifact.content_type in INERT_TYPES else "application/octet-stream",
        )
    else:
        extension = ".md" if artifact.content_type == "text/markdown" else ""
        response = HttpResponse(selected.head.content, content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = content_disposition_header(True, _download_name(artifact, extension))
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    what = "original" if request.GET.get("original") or not selected.is_text else "text"
    audit_record(action=AuditEvent.Action.EXPORT, obj=artifact, detail={"as": what})
    return response
