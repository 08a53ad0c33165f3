from django.conf import settings
from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext, ngettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from artifacts.uploads import UploadError, upload_too_large_message
from conversations.selectors import conversation_viewable

from . import selectors, services
from .forms import LibraryDocumentForm


def _library_page(request, *, form: LibraryDocumentForm, status: int = 200):
    query = request.GET.get("q", "").replace("\x00", "")
    items = selectors.library_list(user=request.user, query=query)
    if request.htmx and request.htmx.target == "library-items":
        # The list again, while documents are being read.
        return render(
            request,
            "library/list.html#items",
            {"items": items, "query": query, "reading": selectors.library_reading(items)},
        )
    context = {
        "items": items,
        "reading": selectors.library_reading(items),
        "query": query,
        "list_limit": selectors.LIST_LIMIT,
        "form": form,
        "upload_max_bytes": settings.ARTIFACT_UPLOAD_MAX_BYTES,
        "upload_too_large": upload_too_large_message(),
    }
    return render(request, "library/list.html", context, status=status)


def library_added_say(request, added: services.BulkAdded) -> None:
    """What the next page says of files handed to the workers: how many are
    being read, and each one left out with why (the project's library too)."""
    if added.documents:
        messages.info(
            request,
            ngettext(
                "%(count)s document is being read; it is listed below.",
                "%(count)s documents are being read; they are listed below.",
                len(added.documents),
            )
            % {"count": len(added.documents)},
        )
    for skipped in added.skipped:
        messages.warning(request, gettext("Not added: %(file)s") % {"file": skipped})


@require_http_methods(["GET", "POST"])
def library_index(request):
    """The library: its documents (or those a search finds), and a form to add one."""
    if request.method == "GET":
        return _library_page(request, form=LibraryDocumentForm(user=request.user))
    form = LibraryDocumentForm(request.POST, request.FILES, user=request.user)
    if form.is_valid() and form.queued:
        added = services.library_documents_queue(
            user=request.user, uploaded_files=form.cleaned_data["file"], group=form.cleaned_data.get("group")
        )
        library_added_say(request, added)
        return redirect("library")
    if form.is_valid():
        try:
            document = services.library_document_create(
                user=request.user,
                title=form.cleaned_data["title"],
                uploaded_file=form.cleaned_data["file"][0],
                group=form.cleaned_data.get("group"),
            )
        except UploadError as error:
            form.add_error("file", str(error))
        else:
            return redirect("library-document", document.pk)
    return _library_page(request, form=form, status=422)


@require_GET
def library_document(request, document_id):
    document = selectors.library_document_get(user=request.user, document_id=document_id)
    if document is None:
        # A library://<id> in an answer or a report links here whoever reads it (shared
        # conversations too): one the reader may not see says so, as one that is gone does.
        return render(request, "404.html", {"library_document": True}, status=404)
    passage = request.GET.get("passage", "").replace("\x00", "")
    at = request.GET.get("at", "")
    context = {
        "document": document,
        "page": selectors.library_document_page(
            document=document, passage=passage, at=int(at) if at.isdecimal() and len(at) < 10 else None
        ),
        "removable": selectors.library_document_removable(user=request.user, document=document),
    }
    return render(request, "library/document.html", context)


@require_POST
def library_document_retry(request, document_id):
    if services.library_document_retry(user=request.user, document_id=document_id) is None:
        raise Http404("No such document.")
    return HttpResponseClientRedirect(reverse("library")) if request.htmx else redirect("library")


@require_POST
def library_document_delete(request, document_id):
    if not services.library_document_delete(user=request.user, document_id=document_id):
        raise Http404("No such document.")
    return HttpResponseClientRedirect(reverse("library")) if request.htmx else redirect("library")


def _quote(request) -> str:
    return request.GET.get("q", "").replace("\x00", "")


@require_GET
def snapshot_detail(request, snapshot_id):
    """A web page as an agent read it, with the words a citation quotes marked."""
    snapshot = selectors.snapshot_get(user=request.user, snapshot_id=snapshot_id)
    if snapshot is None:
        return render(request, "404.html", {"snapshot": True}, status=404)
    quote = _quote(request)
    context = {
        "snapshot": snapshot,
        "page": selectors.snapshot_page(snapshot=snapshot, quote=quote),
        "quote": " ".join(quote.split())[: selectors.PASSAGE_MAX_CHARS],
        # Only a web address is a link: the URL was the model's to choose.
        "live": snapshot.url if snapshot.url.lower().startswith(("http://", "https://")) else "",
    }
    return render(request, "library/snapshot.html", context)


@require_GET
def source_open(request, conversation_id):
    """Where a link of an answer or a report in the conversation leads: the
    snapshot of the page as an agent read it there, else a page saying none
    was kept, with the live page's link; never a redirect to the URL given,
    which anyone could write into a link."""
    conversation = conversation_viewable(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        return render(request, "404.html", status=404)
    url = request.GET.get("url", "").replace("\x00", "")
    snapshot = selectors.snapshot_find(conversation=conversation, url=url)
    if snapshot is not None:
        return redirect(selectors.snapshot_page_url(snapshot_id=snapshot.pk, quote=_quote(request)))
    context = {
        "conversation": conversation,
        "url": url,
        "live": url if url.lower().startswith(("http://", "https://")) else "",
    }
    return render(request, "library/no_snapshot.html", context)
