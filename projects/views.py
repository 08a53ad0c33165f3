"""A project's pages, and a conversation's project and schedule. Thin: each
finds what the user may touch (projects.access: a project they read, one they
own, one they contribute to; a conversation they own) or answers 404, then
calls a service."""

from datetime import time

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from agents.selectors import lead_model_options, tools_needing_approval
from artifacts.uploads import UploadError, upload_too_large_message
from conversations.selectors import conversation_get, share_groups
from library import selectors as library_selectors
from library import services as library_services
from library.forms import LibraryDocumentForm
from library.views import library_added_say

from . import access, schedules, selectors, services
from .forms import ScheduleForm
from .models import ProjectMember, Schedule


def _readable_or_404(request, project_id):
    project = access.project_viewable(user=request.user, project_id=project_id)
    if project is None:
        raise Http404("No such project.")
    return project


def _owned_or_404(request, project_id):
    project = access.project_owned(user=request.user, project_id=project_id)
    if project is None:
        raise Http404("No such project.")
    return project


def _contributable_or_404(request, project_id):
    # A reader may see the project, not add to it: refused as a page that is not there.
    project = access.project_contributed(user=request.user, project_id=project_id)
    if project is None:
        raise Http404("No such project.")
    return project


def _conversation_or_404(request, conversation_id):
    conversation = conversation_get(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation.")
    return conversation


def _project_page(request, project, *, status=200, error="", settings_error="", library_form=None, draft=""):
    query = request.GET.get("q", "").replace("\x00", "").strip()
    role = selectors.project_role(user=request.user, project=project)
    items = library_selectors.library_list(user=request.user, project=project)
    context = {
        "project": project,
        "role": role,
        "query": query,
        "conversations": selectors.project_conversations(project=project),
        "reports": selectors.project_reports(project=project, query=query),
        "schedules": selectors.project_schedules(project=project),
        "library_items": items,
        "reading": library_selectors.library_reading(items),
        "error": error,
        "draft": draft,
        "settings_error": settings_error,
        "lead_models": lead_model_options(chosen=project.lead_model),
        "member_by_name": not role.owner and project.members.filter(user=request.user).exists(),
    }
    if role.contributor:
        form = library_form or LibraryDocumentForm(user=request.user)
        # A project's documents are its readers': no group to limit them to.
        form.groups_offered = False
        context.update(
            form=form,
            upload_max_bytes=settings.ARTIFACT_UPLOAD_MAX_BYTES,
            upload_too_large=upload_too_large_message(),
        )
    if role.owner:
        context.update(members=selectors.project_members(project=project), share_groups=share_groups(user=request.user))
    return render(request, "projects/project.html", context, status=status)


def project_ask_refused(request, project, *, error: str):
    """The project's page again after its question was refused (the budget
    spent, say): the question stays in its box, with why."""
    return _project_page(request, project, status=422, error=error, draft=request.POST.get("content", ""))


@require_http_methods(["GET", "POST"])
def project_create(request):
    if request.method == "GET":
        return render(request, "projects/new.html", {"lead_models": lead_model_options(chosen="")})
    try:
        project = services.project_create(
            user=request.user,
            name=request.POST.get("name", ""),
            instructions=request.POST.get("instructions", ""),
            lead_model=request.POST.get("model", ""),
        )
    except ValidationError as error:
        context = {"error": error.messages[0], "lead_models": lead_model_options(chosen=request.POST.get("model", ""))}
        # What was typed comes back: a refusal loses nothing.
        context.update(name=request.POST.get("name", ""), instructions=request.POST.get("instructions", ""))
        return render(request, "projects/new.html", context, status=422)
    return redirect(project)


@require_GET
def project_detail(request, project_id):
    project = _readable_or_404(request, project_id)
    if request.htmx and request.htmx.target == "project-library-items":
        # The project's documents again, while a worker reads them.
        items = library_selectors.library_list(user=request.user, project=project)
        return render(
            request,
            "projects/project.html#library_items",
            {"project": project, "library_items": items, "reading": library_selectors.library_reading(items)},
        )
    return _project_page(request, project)


@require_POST
def project_update(request, project_id):
    project = _owned_or_404(request, project_id)
    try:
        services.project_update(
            project=project,
            name=request.POST.get("name", ""),
            instructions=request.POST.get("instructions", ""),
            lead_model=request.POST.get("model", ""),
        )
    except ValidationError as error:
        project.refresh_from_db()
        return _project_page(request, project, status=422, settings_error=error.messages[0])
    messages.success(request, gettext("The project is saved."))
    return redirect(project)


@require_POST
def project_delete(request, project_id):
    project = _owned_or_404(request, project_id)
    try:
        services.project_delete(project=project)
    except ValidationError as error:
        if not request.htmx:
            return _project_page(request, project, status=422, settings_error=error.messages[0])
        messages.error(request, error.messages[0])
        return HttpResponseClientRedirect(f"{project.get_absolute_url()}#project-settings")
    messages.success(request, gettext("The project “%(name)s” is deleted.") % {"name": project.name})
    return HttpResponseClientRedirect(reverse("chat")) if request.htmx else redirect("chat")


@require_POST
def member_add(request, project_id):
    project = _owned_or_404(request, project_id)
    try:
        services.member_add(
            project=project,
            by=request.user,
            role=request.POST.get("role", ProjectMember.Role.READER),
            username=request.POST.get("username", "") if request.POST.get("audience") != "group" else "",
            group_id=request.POST.get("group", "") if request.POST.get("audience") == "group" else "",
        )
    except ValidationError as error:
        return _project_page(request, project, status=422, settings_error=error.messages[0])
    return redirect(f"{project.get_absolute_url()}#project-members")


@require_POST
def member_remove(request, project_id):
    project = _owned_or_404(request, project_id)
    services.member_remove(project=project, member_id=request.POST.get("member"))
    return redirect(f"{project.get_absolute_url()}#project-members")


@require_POST
def member_leave(request, project_id):
    project = _readable_or_404(request, project_id)
    if services.member_leave(project=project, user=request.user):
        messages.success(request, gettext("You left the project “%(name)s”.") % {"name": project.name})
        return redirect("chat")
    return redirect(project)


@require_POST
def library_add(request, project_id):
    """Add documents to the project's own library, as the Library page adds to the team's."""
    project = _contributable_or_404(request, project_id)
    form = LibraryDocumentForm(request.POST, request.FILES, user=request.user)
    if form.is_valid() and form.queued:
        added = library_services.library_documents_queue(
            user=request.user, uploaded_files=form.cleaned_data["file"], project=project
        )
        library_added_say(request, added)
        return redirect(f"{project.get_absolute_url()}#project-library")
    if form.is_valid():
        try:
            library_services.library_document_create(
                user=request.user,
                title=form.cleaned_data["title"],
                uploaded_file=form.cleaned_data["file"][0],
                project=project,
            )
        except UploadError as error:
            form.add_error("file", str(error))
        else:
            return redirect(f"{project.get_absolute_url()}#project-library")
    return _project_page(request, project, status=422, library_form=form)


@require_POST
def conversation_move(request, conversation_id):
    """Move the user's conversation into a project they contribute to, or out ("")."""
    conversation = _conversation_or_404(request, conversation_id)
    project = None
    if request.POST.get("project"):
        project = _contributable_or_404(request, request.POST["project"])
    try:
        services.conversation_move(conversation=conversation, user=request.user, project=project)
    except ValidationError as error:
        messages.error(request, error.messages[0])
    return redirect(conversation)


def _schedule_form(request, conversation, data=None):
    schedule = selectors.schedule_of(conversation=conversation)
    tools = sorted({*tools_needing_approval(), *(schedule.allowed_tools if schedule else ())})
    if schedule is not None:
        initial = {
            "question": schedule.question,
            "frequency": schedule.frequency,
            "weekdays": schedule.weekdays,
            "day_of_month": schedule.day_of_month,
            "at": schedule.time,
            "time_zone": schedule.time_zone,
            "allowed_tools": schedule.allowed_tools,
        }
    else:
        now = timezone.localtime()
        first = conversation.messages.filter(parent__isnull=True).order_by("created_at", "pk").first()
        initial = {
            "question": first.content if first else conversation.title,
            "frequency": Schedule.Frequency.WEEKLY,
            "weekdays": [now.weekday()],
            "day_of_month": now.day,
            "at": time(8, 0),
            "time_zone": timezone.get_current_timezone_name(),
        }
    return schedule, ScheduleForm(data, initial=initial, tools=[(name, name) for name in tools])


@require_http_methods(["GET", "POST"])
def schedule_edit(request, conversation_id):
    """ "Repeat this research": the conversation's schedule, set or changed."""
    conversation = _conversation_or_404(request, conversation_id)
    schedule, form = _schedule_form(request, conversation, request.POST if request.method == "POST" else None)
    error = ""
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            schedules.schedule_set(
                conversation=conversation,
                question=data["question"],
                frequency=data["frequency"],
                at=data["at"],
                time_zone=data["time_zone"],
                weekdays=data["weekdays"],
                day_of_month=data["day_of_month"],
                allowed_tools=data["allowed_tools"],
            )
        except ValidationError as exc:
            error = exc.messages[0]
        else:
            messages.success(request, gettext("The research will repeat."))
            return redirect("schedule-edit", conversation.pk)
    status = 422 if request.method == "POST" else 200
    context = {"conversation": conversation, "schedule": schedule, "form": form, "error": error}
    return render(request, "projects/schedule.html", context, status=status)


@require_POST
def schedule_action(request, conversation_id):
    """Pause, resume or stop the conversation's schedule."""
    conversation = _conversation_or_404(request, conversation_id)
    schedule = selectors.schedule_of(conversation=conversation)
    if schedule is None:
        raise Http404("No such schedule.")
    action = request.POST.get("action")
    if action == "pause":
        schedules.schedule_pause(schedule=schedule, reason=gettext("Paused by its owner."))
    elif action == "resume":
        schedules.schedule_resume(schedule=schedule)
    elif action == "delete":
        schedules.schedule_delete(schedule=schedule)
        messages.success(request, gettext("The research no longer repeats."))
        return redirect(conversation)
    return redirect("schedule-edit", conversation.pk)
