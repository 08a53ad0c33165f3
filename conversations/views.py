import uuid
from urllib.parse import parse_qs, urlencode, urlsplit

from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import translation
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect, push_url, reswap, retarget

from agents import selectors as agent_selectors
from agents.budgets import budget_notice
from agents.services import notices as agent_notices
from agents.services import permissions as agent_permissions
from agents.thread import ThreadPage, thread_entries, thread_page, thread_page_before
from artifactflow.ids import id_from_text
from artifacts import conversation_export
from artifacts import pane as artifact_pane
from audit.models import AuditEvent
from audit.services import audit_record
from conversations import lifecycle
from projects import access
from projects import selectors as project_selectors
from projects import views as project_views

from . import selectors, services


def _message_or_404(conversation, message_id):
    message = selectors.message_get(conversation=conversation, message_id=message_id)
    if message is None:
        raise Http404("No such message.")
    return message


def _conversation_or_404(request, conversation_id):
    conversation = selectors.conversation_get(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation.")
    return conversation


def _viewable_or_404(request, conversation_id):
    """A conversation the user may read: their own or one shared with them.
    Only for reading; every write goes through _conversation_or_404."""
    conversation = selectors.conversation_viewable(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation.")
    return conversation


def _read_only(request, conversation) -> bool:
    return conversation is not None and conversation.owner_id != request.user.pk


def _share_context(request, *, conversation, error: str = "") -> dict:
    """The owner's share panel: whom the conversation is shared with, and whom it can be."""
    shares = selectors.conversation_shares(conversation=conversation)
    return {
        "conversation": conversation,
        "shares": [share for share in shares if not share.everyone],
        "shared_with_everyone": any(share.everyone for share in shares),
        "share_groups": selectors.share_groups(user=request.user),
        "share_error": error,
    }


def _list_context(request, *, conversation, state=None) -> dict:
    """The sidebar's list as the request asks for it: a search (`q`), a page
    (`before`), and where its "Load more" leads with and without HTMX."""
    query = request.GET.get("q", "")
    before = request.GET.get("before", "")
    page = selectors.conversation_list(user=request.user, query=query, before=before)
    # One reverse for the whole list: a reverse for each row cost as much as the rest of the row.
    placeholder = uuid.UUID(int=0)
    url = reverse("conversation-detail", args=[placeholder])
    # The pinned ones head the first page of the list; a search finds them among the rest.
    pinned = selectors.conversation_pinned(user=request.user) if not query and not before else []
    # One query marks every conversation shown, however long the list.
    if state is None:
        state = agent_selectors.conversation_marks(user=request.user)
    # The projects head the list, each with its latest conversations, on its first page.
    projects = []
    if not query and not before:
        projects = project_selectors.projects_sidebar(
            user=request.user, projects=project_selectors.projects_for(user=request.user)
        )
    in_projects = [item for project in projects for item in project.recent]
    for item in (*pinned, *page, *in_projects):
        item.url = url.replace(str(placeholder), str(item.pk))
        item.mark = state.get(item.pk)
    context = {
        "conversations": page,
        "placeholder_id": placeholder,
        "pinned": pinned,
        "projects": projects,
        "current_project_id": conversation.project_id if conversation else None,
        "attention": state.waiting_count,
        "query": query,
        "conversation": conversation,
        "current_id": conversation.pk if conversation else None,
        "continued": bool(before),
    }
    if page.next_cursor:
        params = {"q": query} if query else {}
        params["before"] = page.next_cursor
        here = conversation.get_absolute_url() if conversation else reverse("chat")
        context["more_href"] = f"{here}?{urlencode(params)}"
        if conversation is not None:
            params["current"] = conversation.pk
        context["more_url"] = f"{reverse('conversation-search')}?{urlencode(params)}"
    return context


def _page(request, *, conversation=None, error="", draft="", state=None):
    read_only = _read_only(request, conversation)
    context = {
        **_list_context(request, conversation=conversation, state=state),
        **_composer_context(conversation, request.user),
        "shared_conversations": selectors.conversations_shared_with(user=request.user),
        "read_only": read_only,
        "entries": [],
        "error": error,
        # A refused message comes back in the composer: a draft survives every refusal.
        "draft": draft,
    }
    if conversation is not None:
        context.update(_origin_context(request, conversation=conversation))
        # ?message= links to one message: the page opens on it (agents.thread.thread_page).
        page = thread_page(conversation=conversation, message_id=id_from_text(request.GET.get("message")))
        context.update(_thread_context(conversation=conversation, page=page, read_only=read_only))
        if not read_only:
            context.update(_share_context(request, conversation=conversation))
            context.update(
                move_projects=project_selectors.projects_contributable(user=request.user),
                schedule=project_selectors.schedule_of(conversation=conversation),
            )
        # The URL may name what the pane shows (see artifacts.pane.pane_context_for_page).
        context.update(
            artifact_pane.pane_context_for_page(
                branch=agent_selectors.branch_shown_live(conversation=conversation),
                artifact_id=request.GET.get("artifact", ""),
                version=request.GET.get("version", ""),
                diff_from=request.GET.get("from", ""),
                diff_to=request.GET.get("to", ""),
            )
        )
    return render(request, "conversations/chat.html", context, status=422 if error else 200)


def _origin_context(request, *, conversation) -> dict:
    """Where a forked conversation came from, linked if the requester may still open it."""
    origin = None
    if conversation.forked_from_id is not None:
        origin = selectors.conversation_viewable(user=request.user, conversation_id=conversation.forked_from_id)
    if origin is None:
        return {}
    url = origin.get_absolute_url()
    if conversation.forked_at_id:
        url += f"?message={conversation.forked_at_id}#message-{conversation.forked_at_id}"
    return {"origin_url": url}


def _composer_context(conversation, user) -> dict:
    """What the composer and a new conversation's examples need."""
    lead_models = agent_selectors.lead_model_options(chosen=conversation.lead_model if conversation else "")
    # Beside Send, once the person has used most of today's budget.
    notice = budget_notice(user=user)
    if conversation is None:
        library = agent_selectors.library_titles(language=translation.get_language(), user=user)
        return {
            "library_titles": library.titles,
            "library_more": library.more,
            "lead_models": lead_models,
            "budget_notice": notice,
        }
    return {
        "active_run": agent_selectors.conversation_active_run(conversation_id=conversation.pk),
        "lead_models": lead_models,
        "budget_notice": notice,
    }


def _thread_context(*, conversation, page: ThreadPage, read_only: bool = False) -> dict:
    return {
        "read_only": read_only,
        "entries": page.entries,
        "older": page.older,
        "older_first": page.older_first,
        "allowed_tools": page.allowed_tools,
        "conversation_id": conversation.pk,
    }


def thread_response(request, *, conversation, branch_changed: bool = False, notice: str = "", posted: bool = False):
    """The thread, with the composer's Send or Stop: a new turn changes it.
    On another branch the artifact pane shows that branch's artifacts, still
    the one the page showed if the branch has it. `notice` says under the
    thread what happened, until the thread is shown again. After the composer
    `posted` a message, its model picker shows the model the conversation keeps."""
    context = {
        **_thread_context(conversation=conversation, page=thread_page(conversation=conversation)),
        "notice": notice,
    }
    thread = render(request, "conversations/chat.html#thread", context)
    composer = {**_composer_context(conversation, request.user), "oob": True}
    response = HttpResponse(thread.content + _composer_oob(request, composer=composer, posted=posted))
    if branch_changed:
        shown = parse_qs(urlsplit(request.htmx.current_url or "").query).get("artifact", [""])[0]
        pane = artifact_pane.pane_context_for_branch_change(
            branch=agent_selectors.branch_shown_live(conversation=conversation), artifact_id=shown
        )
        response.content += render(request, "artifacts/pane.html#pane", {**pane, "pane_oob": True}).content
        push_url(response, pane["page_url"])
    return response


def _composer_oob(request, *, composer: dict, posted: bool) -> bytes:
    html = render(request, "live/page.html#composer_actions", composer).content
    html += render(request, "live/page.html#budget_notice", composer).content
    if posted:
        # Swapped before app.js resets the form, which then resets the picker to this choice, not the page's first.
        html += render(request, "conversations/chat.html#composer_model", composer).content
    return html


def turn_response(request, *, conversation, message):
    """A question sent on the branch shown: its turn alone, added below the
    turns on the page (a long thread is not sent again), with the composer's
    Stop. (A notice under the thread, about what came before, the page took
    away as it sent: app.js.)"""
    entry = thread_entries(messages=[message])[0]
    turn = render(request, "live/turn.html#turn", {"entry": entry, "oob": False})
    composer = {**_composer_context(conversation, request.user), "oob": True}
    response = HttpResponse(turn.content + _composer_oob(request, composer=composer, posted=True))
    return reswap(retarget(response, "#thread-turns"), "beforeend")


def _invalid(request, exc: ValidationError, *, conversation=None):
    error = exc.messages[0]
    if not request.htmx:
        return _page(request, conversation=conversation, error=error, draft=request.POST.get("content", ""))
    response = render(request, "conversations/chat.html#composer_error", {"error": error}, status=422)
    return reswap(retarget(response, "#composer-error"), "outerHTML")


@require_GET
def chat(request):
    return _page(request)


@require_GET
def conversation_detail(request, conversation_id):
    conversation = _viewable_or_404(request, conversation_id)
    # The marks of the user's own conversations, and of others' whose scheduled turn they were told of.
    state = agent_selectors.conversation_marks(user=request.user)
    if state.get(conversation.pk) == agent_selectors.MARK_FINISHED:
        # Looking at it: its ended turn is news no more, here and on the user's other pages.
        if conversation.owner_id == request.user.pk:
            services.conversation_seen(conversation=conversation)
        else:
            agent_notices.notices_seen(user=request.user, conversation_id=conversation.pk)
        state.marks.pop(conversation.pk)
    return _page(request, conversation=conversation, state=state)


@require_POST
def conversation_create(request):
    project = None
    if request.POST.get("project"):
        # Only a project the user may add to; any other is one that is not there.
        project = access.project_contributed(user=request.user, project_id=request.POST["project"])
        if project is None:
            raise Http404("No such project.")
    try:
        conversation = lifecycle.conversation_start(
            user=request.user,
            content=request.POST.get("content", ""),
            lead_model=request.POST.get("model"),
            project=project,
        )
    except ValidationError as exc:
        if project is not None:
            return project_views.project_ask_refused(request, project, error=exc.messages[0])
        return _invalid(request, exc)
    url = conversation.get_absolute_url()
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
def message_create(request, conversation_id):
    conversation = _conversation_or_404(request, conversation_id)
    parent = lifecycle.ACTIVE_BRANCH
    named = request.POST.get("parent")
    if named == "root":
        parent = None
    elif named:
        parent = _message_or_404(conversation, named)
    try:
        message = lifecycle.message_post(
            conversation=conversation,
            content=request.POST.get("content", ""),
            parent=parent,
            lead_model=request.POST.get("model"),
        )
    except ValidationError as exc:
        return _invalid(request, exc, conversation=conversation)
    if not request.htmx:
        return redirect(conversation.get_absolute_url())
    # The page says which turn it ends with (app.js): one showing another branch
    # than the conversation's now (switched in another tab) is sent the thread.
    shown = id_from_text(request.POST.get("after"))
    if parent is lifecycle.ACTIVE_BRANCH and message.parent_id is not None and shown in (None, message.parent_id):
        return turn_response(request, conversation=conversation, message=message)
    # An edited or re-asked message starts a branch of its own; a first one, the thread.
    return thread_response(
        request, conversation=conversation, branch_changed=message.parent_id is not None, posted=True
    )


@require_GET
def thread_older(request, conversation_id):
    """The turns before the message `before` on its branch, to go above it
    (the thread's "Load older messages"); without htmx, the page opened there."""
    conversation = _viewable_or_404(request, conversation_id)
    message = _message_or_404(conversation, request.GET.get("before", ""))
    page = thread_page_before(message=message)
    if not request.htmx:
        first = page.entries[0].message.pk if page.entries else message.pk
        return redirect(f"{conversation.get_absolute_url()}?message={first}#message-{first}")
    context = _thread_context(conversation=conversation, page=page, read_only=_read_only(request, conversation))
    return render(request, "conversations/chat.html#turns", context)


@require_GET
def conversation_search(request):
    """The list for the search box, or with `before` the next page of it for
    "Load more" to put in its own place."""
    query = request.GET.get("q", "")
    before = request.GET.get("before", "")
    if not request.htmx:
        params = {name: value for name, value in (("q", query), ("before", before)) if value}
        return redirect(f"{reverse('chat')}?{urlencode(params)}" if params else reverse("chat"))
    current_id = request.GET.get("current")
    current = selectors.conversation_get(user=request.user, conversation_id=current_id) if current_id else None
    context = _list_context(request, conversation=current)
    if before:
        # Goes after the page before, still on screen: conversations of the
        # group it ended in join that group rather than repeat its heading.
        return render(request, "conversations/chat.html#conversation_page", {**context, "appending": True})
    return render(request, "conversations/chat.html#conversation_items", context)


@require_POST
def conversation_rename(request, conversation_id):
    conversation = _conversation_or_404(request, conversation_id)
    error = ""
    try:
        services.conversation_rename(conversation=conversation, title=request.POST.get("title", ""))
    except ValidationError as exc:
        error = exc.messages[0]
        conversation.refresh_from_db()
    if not request.htmx:
        return (
            _page(request, conversation=conversation, error=error)
            if error
            else redirect(conversation.get_absolute_url())
        )
    if _from_sidebar(request):
        return _sidebar_item(request, conversation=conversation, error=error)
    context = {
        **_share_context(request, conversation=conversation),
        "head_error": error,
        # A new title shows in the list too.
        "oob_list": not error,
        **_list_context(request, conversation=conversation),
        **_origin_context(request, conversation=conversation),
    }
    return render(request, "conversations/chat.html#conversation_head", context, status=422 if error else 200)


@require_POST
def conversation_delete(request, conversation_id):
    conversation = _conversation_or_404(request, conversation_id)
    try:
        lifecycle.conversation_delete(conversation=conversation)
    except ValidationError as exc:
        if request.htmx and _from_sidebar(request):
            return _sidebar_item(request, conversation=conversation, error=exc.messages[0])
        if not request.htmx:
            return _page(request, conversation=conversation, error=exc.messages[0])
        context = {
            **_share_context(request, conversation=conversation),
            **_origin_context(request, conversation=conversation),
            "head_error": exc.messages[0],
            "deleting": True,
        }
        return render(request, "conversations/chat.html#conversation_head", context, status=422)
    if request.htmx and _from_sidebar(request) and request.POST.get("current") != str(conversation_id):
        # Deleted from the list of a page showing another: its item goes, the page stays.
        return HttpResponse("")
    return HttpResponseClientRedirect(reverse("chat")) if request.htmx else redirect("chat")


def _from_sidebar(request) -> bool:
    """Whether the list's menu (rather than the conversation's own header) asked."""
    return request.POST.get("source") == "sidebar"


def _sidebar_item(request, *, conversation, error: str = ""):
    """The conversation's item in the list, after its menu renamed it (or failed to)."""
    conversation.url = conversation.get_absolute_url()
    conversation.mark = agent_selectors.conversation_marks(user=request.user).get(conversation.pk)
    try:
        current_id = uuid.UUID(request.POST.get("current", ""))
    except ValueError:
        current_id = None
    context = {"item": conversation, "item_error": error, "current_id": current_id}
    response = render(request, "conversations/chat.html#conversation_item", context, status=422 if error else 200)
    if current_id == conversation.pk and not error:
        # Renamed from the list while its page is open: the page's heading too.
        title = {"title": conversation.title, "oob": True}
        response.content += render(request, "conversations/chat.html#conversation_title", title).content
    return response


@require_POST
def conversation_pin(request, conversation_id):
    """Pin the conversation to the top of the list, or unpin it (`pinned`:
    "1" or "0"); the answer is the list's first page."""
    conversation = _conversation_or_404(request, conversation_id)
    error = ""
    try:
        services.conversation_pin(conversation=conversation, pinned=request.POST.get("pinned") == "1")
    except ValidationError as exc:
        error = exc.messages[0]
    current = selectors.conversation_get(user=request.user, conversation_id=request.POST.get("current"))
    if not request.htmx:
        return redirect(current.get_absolute_url() if current else "chat")
    context = {**_list_context(request, conversation=current), "list_error": error}
    return render(request, "conversations/chat.html#conversation_items", context, status=422 if error else 200)


@require_POST
def branch_switch(request, conversation_id):
    conversation = _conversation_or_404(request, conversation_id)
    message = _message_or_404(conversation, request.POST.get("message", ""))
    services.branch_switch(conversation=conversation, message=message)
    if not request.htmx:
        return redirect(conversation.get_absolute_url())
    return thread_response(request, conversation=conversation, branch_changed=True)


@require_POST
def allowed_tool_revoke(request, conversation_id):
    """Ask again before a tool the user always allowed on the branch shown."""
    conversation = _conversation_or_404(request, conversation_id)
    tool = request.POST.get("tool", "")
    if conversation.active_branch is None:
        raise Http404("This conversation has no messages.")
    allowed = agent_permissions.branch_tool_revoke(message=conversation.active_branch, tool=tool)
    if not request.htmx:
        return redirect(conversation.get_absolute_url())
    context = {"allowed_tools": allowed, "conversation_id": conversation.pk, "revoked": tool}
    return render(request, "conversations/chat.html#allowed_tools", context)


@require_POST
def share_create(request, conversation_id):
    """Share the conversation (the owner's alone) with a user by name, a
    group, or everyone signed in (`audience`: user, group, everyone; with
    `on` for everyone)."""
    conversation = _conversation_or_404(request, conversation_id)
    audience = request.POST.get("audience", "")
    error = ""
    try:
        if audience == "user":
            services.share_with_user(
                conversation=conversation, by=request.user, username=request.POST.get("username", "")
            )
        elif audience == "group":
            services.share_with_group(conversation=conversation, by=request.user, group_id=request.POST.get("group"))
        elif audience == "everyone":
            on = request.POST.get("on") == "1"
            services.share_with_everyone(conversation=conversation, by=request.user, on=on)
        else:
            raise Http404("No such audience.")
    except ValidationError as exc:
        error = exc.messages[0]
    return _share_response(request, conversation=conversation, error=error)


@require_POST
def share_delete(request, conversation_id):
    """Revoke one share: those it let in can no longer open the conversation,
    and their open pages of it close."""
    conversation = _conversation_or_404(request, conversation_id)
    share_id = id_from_text(request.POST.get("share"))
    if share_id is None:
        raise Http404("No such share.")
    if not services.share_remove(conversation=conversation, share_id=share_id):
        raise Http404("No such share.")
    return _share_response(request, conversation=conversation)


def _share_response(request, *, conversation, error: str = ""):
    if not request.htmx:
        if error:
            return _page(request, conversation=conversation, error=error)
        return redirect(conversation.get_absolute_url())
    context = {**_share_context(request, conversation=conversation, error=error), "share_open": True}
    return render(request, "conversations/share.html#share_panel", context, status=422 if error else 200)


@require_POST
def conversation_fork(request, conversation_id):
    """Continue the branch up to `message` in a conversation of the requester's
    own: the owner's, or a reader's of a conversation shared with them."""
    conversation = _viewable_or_404(request, conversation_id)
    message = _message_or_404(conversation, request.POST.get("message", ""))
    try:
        fork = lifecycle.conversation_fork(user=request.user, conversation=conversation, message=message)
    except ValidationError as exc:
        return _page(request, conversation=conversation, error=exc.messages[0])
    url = fork.get_absolute_url()
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _download(conversation, export: conversation_export.Export, *, what: str) -> HttpResponse:
    audit_record(action=AuditEvent.Action.EXPORT, obj=conversation, detail={"as": what, "file": export.filename})
    response = HttpResponse(export.data, content_type=export.content_type)
    response["Content-Disposition"] = content_disposition_header(True, export.filename)
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_GET
def conversation_export_markdown(request, conversation_id):
    conversation = _viewable_or_404(request, conversation_id)
    export = conversation_export.conversation_markdown(conversation=conversation)
    return _download(conversation, export, what="markdown")


@require_GET
def conversation_export_docx(request, conversation_id):
    conversation = _viewable_or_404(request, conversation_id)
    export = conversation_export.conversation_docx(conversation=conversation, user=request.user)
    return _download(conversation, export, what="docx")


@require_GET
def conversation_export_zip(request, conversation_id):
    conversation = _viewable_or_404(request, conversation_id)
    export = conversation_export.conversation_zip(conversation=conversation)
    return _download(conversation, export, what="zip")
