from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import retarget

from artifactflow.citations import CITATIONS_KEY
from artifactflow.csvfiles import csv_response
from conversations.views import thread_response

from . import budgets, selectors, thread, usage
from .forms import UsageFilterForm, usage_presets
from .models import Run
from .services import permissions, runs
from .state import PermissionDecision


def _run_or_404(request, run_id) -> Run:
    run = selectors.run_get(user=request.user, run_id=run_id)
    if run is None:
        raise Http404("No such turn.")
    return run


def _message_response(request, run: Run, *, error: str = "", status: int = 200) -> HttpResponse:
    """The run's message as the page shows it, or back to the page without HTMX."""
    if not request.htmx:
        return redirect("conversation-detail", run.message.conversation_id)
    conversation = run.message.conversation
    entry = thread.thread_entry_for_run(conversation=conversation, run_id=run.pk)
    return render(request, "live/turn.html#turn", {"entry": entry, "run_error": error}, status=status)


def _acting(request, run_id, action):
    # Whose run it is is settled before anything else, so no answer below,
    # error or not, can be about another user's turn.
    run = _run_or_404(request, run_id)
    try:
        run = action()
    except Run.DoesNotExist:
        raise Http404("No such turn.") from None
    except runs.RunStateError as exc:
        return _message_response(request, run, error=str(exc), status=409)
    return _message_response(request, run)


@require_POST
def run_permission(request, run_id):
    run = _run_or_404(request, run_id)
    decision = request.POST.get("decision", "")
    try:
        run = permissions.permission_answer(
            run_id=run_id, user=request.user, request_id=request.POST.get("request_id", ""), decision=decision
        )
    except runs.RunStateError as exc:
        # Answered meanwhile (another tab, a double click) or expired: the
        # turn as it is now, with the reason, rather than an error response.
        return _message_response(request, run, error=str(exc))
    response = _message_response(request, run)
    if request.htmx and decision == PermissionDecision.ALWAYS:
        # The list of always-allowed tools under the thread gains this one.
        allowed = selectors.branch_allowed_tools(message=run.message)
        context = {"allowed_tools": allowed, "conversation_id": run.message.conversation_id, "oob": True}
        response.content += render_to_string("conversations/chat.html#allowed_tools", context, request=request).encode()
    return response


@require_POST
def run_cancel(request, run_id):
    return _acting(request, run_id, lambda: runs.run_cancel(run_id=run_id, user=request.user))


RETRIED_AS_BRANCH = gettext_noop("Tried again as a new branch; your later turns stay on the branch you came from.")


@require_POST
def run_retry(request, run_id):
    run = _run_or_404(request, run_id)
    try:
        retried = runs.run_retry(run_id=run_id, user=request.user)
    except Run.DoesNotExist:
        raise Http404("No such turn.") from None
    except runs.RunStateError as exc:
        return _message_response(request, run, error=str(exc), status=409)
    if retried.message_id == run.message_id or not request.htmx:
        return _message_response(request, retried)
    # The turn had later turns below it and was tried again beside them
    # (runs.run_retry): the page shows that branch, and says so.
    response = thread_response(
        request, conversation=retried.message.conversation, branch_changed=True, notice=gettext(RETRIED_AS_BRANCH)
    )
    return retarget(response, "#thread")


@require_GET
def run_activity(request, run_id):
    # Reading: a conversation shared with the user shows its activity too.
    run = selectors.run_viewable(user=request.user, run_id=run_id)
    if run is None:
        raise Http404("No such turn.")
    context = {
        "fold": selectors.run_activity(run=run),
        "model_use": selectors.model_use(metrics=run.metrics),
        "run": run,
        "citations": run.message.metadata.get(CITATIONS_KEY),
        # Artifact links open in this conversation's pane.
        "conversation_id": run.message.conversation_id,
        # A reader it is shared with was not the one asked to approve.
        "read_only": run.message.conversation.owner_id != request.user.pk,
    }
    return render(request, "agents/activity.html", context)


@require_GET
def usage_page(request):
    """Tokens and estimated cost by person, group, model, kind and period:
    everyone's for whoever may view token use (agents.view_tokenuse), the
    person's own for everyone else, to whom another person or a group is a
    404. `?format=csv` downloads exactly the tables shown."""
    everyone = usage.usage_sees_everyone(user=request.user)
    if not everyone and (
        request.GET.get("person", str(request.user.pk)) != str(request.user.pk) or "group" in request.GET
    ):
        raise Http404("No such person.")
    form = UsageFilterForm(request.GET, user=request.user, everyone=everyone)
    if not form.is_valid():
        return render(request, "agents/usage.html", {"form": form, "everyone": everyone}, status=400)
    report = usage.usage_report(usage_filter=form.usage_filter())
    if request.GET.get("format") == "csv":
        filename = f"usage-{report.filter.start.isoformat()}-{report.filter.end.isoformat()}.csv"
        return csv_response(filename=filename, rows=usage.usage_csv_rows(report))
    query = request.GET.copy()
    query["format"] = "csv"
    context = {
        "form": form,
        "everyone": everyone,
        "report": report,
        "presets": usage_presets(today=timezone.localdate()),
        "csv_query": query.urlencode(),
        "budget_notice": budgets.budget_notice(user=request.user),
    }
    return render(request, "agents/usage.html", context)
