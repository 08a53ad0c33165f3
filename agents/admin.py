import json

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_post_parameters

from accounts import onboarding
from audit.admin import StaffViewAudited

from .budgets import budget_of, budgets_of, metrics_tokens, spent_today, tokens_today
from .config import AGENTS
from .models import HttpTool, McpServer, Run, RunEvent, RunNotice, TokenBudget, TokenSpend, TokenUse
from .services.admission import waiting_place
from .services.retention import runs_fold_requested
from .services.runs import runs_cancel_by_staff
from .tools.http import http_tool_test
from .tools.mcp import mcp_server_test
from .trace import run_trace

# A JSON value longer than this is shown folded.
JSON_FOLD_CHARS = 2000
# The run list's question is cut to this many characters; the run's page shows it whole.
QUESTION_LIST_CHARS = 80


def json_block(value) -> str:
    """A JSON field as the admin shows it: formatted, and folded when long."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    if len(text) <= JSON_FOLD_CHARS:
        return format_html('<pre class="json">{}</pre>', text)
    return format_html('<details><summary>{} characters</summary><pre class="json">{}</pre></details>', len(text), text)


class ReadOnlyAdmin(admin.ModelAdmin):
    """What the system wrote is evidence: viewed, never added or edited here."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class PurgeForm(forms.Form):
    older_than_days = forms.IntegerField(min_value=0, initial=30, label=_("Finished more than this many days ago"))


@admin.register(Run)
class RunAdmin(StaffViewAudited, ReadOnlyAdmin):
    list_display = (
        "id",
        "user",
        "question_short",
        "conversation_link",
        "status",
        "place",
        "duration",
        "tokens",
        "short_error",
        "created_at",
    )
    list_filter = ("status", "model", "created_at", ("message__conversation__owner", admin.RelatedOnlyFieldListFilter))
    search_fields = (
        "=id",
        "message__content",
        "message__conversation__title",
        "message__conversation__owner__username",
        "error",
    )
    list_select_related = ("message__conversation__owner",)
    date_hierarchy = "created_at"
    actions = ["runs_cancel"]
    fields = (
        "status",
        "user",
        "conversation_link",
        "question",
        "model",
        "model_label",
        "lead_model",
        "attempts",
        "worker_deaths",
        "worker",
        "cancel_requested",
        "created_at",
        "started_at",
        "finished_at",
        "folded_at",
        "heartbeat_at",
        "error",
        "metrics_json",
        "checkpoint_json",
    )
    readonly_fields = fields
    change_form_template = "admin/agents/run/change_form.html"
    change_list_template = "admin/agents/run/change_list.html"

    def has_delete_permission(self, request, obj=None):
        # A run goes with its conversation, which keeps the thread whole.
        return False

    def has_cancel_permission(self, request):
        return request.user.has_perm("agents.cancel_run")

    def has_purge_permission(self, request):
        return request.user.has_perm("agents.purge_chunks")

    @admin.display(description=_("user"), ordering="message__conversation__owner__username")
    def user(self, run):
        return run.message.conversation.owner

    @admin.display(description=_("conversation"))
    def conversation_link(self, run):
        # Not the conversation's own page: staff cannot read others' conversations
        # there (a 404 by design); the run's trace is what they may see of it.
        conversation = run.message.conversation
        return format_html(
            '<a href="{}">{}</a> (<a href="{}#trace">{}</a>)',
            reverse("admin:conversations_conversation_change", args=[conversation.pk]),
            conversation.title or conversation.pk,
            reverse("admin:agents_run_change", args=[run.pk]),
            gettext("trace"),
        )

    @admin.display(description=_("question"))
    def question(self, run):
        return run.message.content

    @admin.display(description=_("question"), ordering="message__content")
    def question_short(self, run):
        return Truncator(run.message.content).chars(QUESTION_LIST_CHARS)

    @admin.display(description=_("duration"))
    def duration(self, run):
        if run.started_at and run.finished_at:
            return f"{(run.finished_at - run.started_at).total_seconds():.1f} s"
        return "—"

    @admin.display(description=_("tokens"))
    def tokens(self, run):
        return metrics_tokens(run.metrics) or "—"

    @admin.display(description=_("waiting"))
    def place(self, run):
        """A waiting run's place: how many of its user's waiting runs are ahead."""
        if run.status != Run.Status.WAITING_SLOT:
            return "—"
        ahead = waiting_place(run=run)
        return gettext("next") if not ahead else gettext("%(count)s ahead") % {"count": ahead}

    @admin.display(description=_("error"))
    def short_error(self, run):
        return Truncator(run.error).chars(80)

    @admin.display(description=_("metrics"))
    def metrics_json(self, run):
        return json_block(run.metrics)

    @admin.display(description=_("checkpoint"))
    def checkpoint_json(self, run):
        return json_block(run.checkpoint)

    def changelist_view(self, request, extra_context=None):
        extra_context = {**(extra_context or {}), "has_purge_permission": self.has_purge_permission(request)}
        return super().changelist_view(request, extra_context)

    def audited_owner(self, run):
        return run.message.conversation.owner

    def change_view(self, request, object_id, form_url="", extra_context=None):
        run = self.get_object(request, object_id)
        # The trace is read only for whom the page will show it; the others get the admin's refusal.
        if run is not None and self.has_view_or_change_permission(request, run):
            extra_context = {**(extra_context or {}), "trace": run_trace(run=run)}
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.action(description=_("Cancel selected runs"), permissions=["cancel"])
    def runs_cancel(self, request, queryset):
        cancelled, ended = runs_cancel_by_staff(run_ids=list(queryset.values_list("pk", flat=True)))
        if cancelled:
            self.message_user(
                request,
                gettext("Cancelled %(count)s run(s): %(ids)s.") % {"count": len(cancelled), "ids": _ids(cancelled)},
                messages.SUCCESS,
            )
        if ended:
            self.message_user(
                request, gettext("Already ended, left as they were: %(ids)s.") % {"ids": _ids(ended)}, messages.WARNING
            )

    def get_urls(self):
        purge = path(
            "purge-chunks/", self.admin_site.admin_view(self.chunks_purge_view), name="agents_run_purge_chunks"
        )
        return [purge, *super().get_urls()]

    def chunks_purge_view(self, request):
        """Counts first (a dry run); with "apply" hands the fold to a worker
        (agents.services.retention), so the request returns at once."""
        if not self.has_purge_permission(request):
            raise PermissionDenied
        form = PurgeForm(request.POST or None, initial={"older_than_days": 30})
        report = None
        if request.method == "POST" and form.is_valid():
            days = form.cleaned_data["older_than_days"]
            if "apply" in request.POST:
                runs = runs_fold_requested(older_than_days=days, enqueue=True)
                self.message_user(
                    request,
                    gettext("The streamed text of %(runs)s runs is being folded in the background.") % {"runs": runs},
                    messages.SUCCESS,
                )
                return redirect("admin:agents_run_changelist")
            report = {"runs": runs_fold_requested(older_than_days=days)}
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Purge streamed text of finished runs"),
            "opts": self.model._meta,
            "form": form,
            "report": report,
        }
        return TemplateResponse(request, "admin/agents/run/purge_chunks.html", context)


def _ids(runs) -> str:
    return ", ".join(str(run.pk) for run in runs)


@admin.register(RunEvent)
class RunEventAdmin(ReadOnlyAdmin):
    list_display = ("run", "seq", "type", "agent", "created_at")
    list_filter = ("type", "agent")
    search_fields = ("=run__id",)
    fields = ("run", "seq", "type", "agent", "created_at", "data_json")
    readonly_fields = fields

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description=_("data"))
    def data_json(self, event):
        return json_block(event.data)


@admin.register(RunNotice)
class RunNoticeAdmin(ReadOnlyAdmin):
    """Who was told a scheduled turn in a shared project ended, and when they looked."""

    list_display = ("run", "user", "created_at", "seen_at")
    list_select_related = ("user",)
    search_fields = ("=run__id", "user__username")
    fields = ("run", "user", "created_at", "seen_at")
    readonly_fields = fields


class PeopleFileForm(forms.Form):
    """The CSV of people to add: uploaded, or sent back as text once it was read."""

    file = forms.FileField(
        label=_("CSV file"),
        required=False,
        help_text=_("UTF-8, its first row naming the columns: username, email, groups (separated by ; or |)."),
    )
    csv_text = forms.CharField(required=False, widget=forms.HiddenInput, max_length=onboarding.MAX_BYTES)
    create_groups = forms.BooleanField(label=_("Create the groups that do not exist yet"), required=False)

    def clean(self):
        data = super().clean()
        if not data.get("file") and not data.get("csv_text"):
            raise forms.ValidationError(gettext("Choose a CSV file."))
        if data.get("file") and data["file"].size > onboarding.MAX_BYTES:
            raise forms.ValidationError(gettext("The file is larger than 1 MB: split it, or add fewer people at once."))
        return data

    def people_data(self) -> bytes:
        upload = self.cleaned_data.get("file")
        return upload.read() if upload else self.cleaned_data["csv_text"].encode()


class TokenBudgetInline(admin.StackedInline):
    model = TokenBudget
    can_delete = True
    extra = 0
    max_num = 1


admin.site.unregister(get_user_model())
admin.site.unregister(Group)


class BudgetedUserChangeList(ChangeList):
    """The list of users, each with their budget and today's spending read for
    the whole page in two queries, not two a user."""

    def get_results(self, request):
        super().get_results(request)
        ids = [user.pk for user in self.result_list]
        budgets, spent = budgets_of(user_ids=ids), spent_today(user_ids=ids)
        for user in self.result_list:
            user.daily_budget, user.spent_today = budgets[user.pk], spent.get(user.pk, 0)


@admin.register(get_user_model())
class BudgetedUserAdmin(UserAdmin):
    """Django's user admin with each user's token budget: editable, and what
    their turns spent today."""

    list_display = (*UserAdmin.list_display, "tokens_today", "daily_budget")
    inlines = (*UserAdmin.inlines, TokenBudgetInline)
    actions = ("password_links",)
    change_list_template = "admin/auth/user/change_list_people.html"

    def get_urls(self):
        people_add = self.admin_site.admin_view(self.people_add_view)
        return [path("add-people/", people_add, name="auth_user_people_add"), *super().get_urls()]

    def people_add_view(self, request):
        """People from a CSV (accounts.onboarding): read and checked, shown
        row by row, and added only when the administrator confirms a file
        without a wrong row; then each one's set-password link."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = PeopleFileForm(request.POST or None, request.FILES or None)
        context = {**self.admin_site.each_context(request), "opts": self.opts, "form": form, "title": _("Add people")}
        if request.method == "POST" and form.is_valid():
            try:
                data = form.people_data()
                rows = onboarding.people_csv_read(data=data, create_groups=form.cleaned_data["create_groups"])
            except onboarding.PeopleFileError as exc:
                form.add_error("file", str(exc))
            else:
                wrong = [row for row in rows if row.errors]
                if not rows:
                    form.add_error("file", gettext("The file names nobody."))
                elif wrong or "confirm" not in request.POST:
                    context.update({"rows": rows, "wrong": wrong, "csv_text": data.decode("utf-8-sig")})
                else:
                    people = onboarding.people_add(rows=rows, create_groups=form.cleaned_data["create_groups"])
                    return self._links_response(request, users=people, title=_("People added"))
        return TemplateResponse(request, "admin/auth/user/people_add.html", context)

    @admin.action(description=_("Make a set-password link for each"), permissions=["change"])
    def password_links(self, request, queryset):
        return self._links_response(request, users=list(queryset.filter(is_active=True)), title=_("Set-password links"))

    def _links_response(self, request, *, users, title):
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "people": onboarding.password_links_make(users=users, request=request),
            "mail_configured": bool(settings.EMAIL_HOST),
            "days": settings.PASSWORD_RESET_TIMEOUT // 86400,
        }
        return TemplateResponse(request, "admin/auth/user/password_links.html", context)

    def get_changelist(self, request, **kwargs):
        return BudgetedUserChangeList

    @admin.display(description=_("tokens today"))
    def tokens_today(self, user):
        spent = getattr(user, "spent_today", None)
        return f"{tokens_today(user_id=user.pk) if spent is None else spent:,}"

    @admin.display(description=_("daily budget"))
    def daily_budget(self, user):
        budget = getattr(user, "daily_budget", None)
        budget = budget_of(user=user) if budget is None else budget
        return f"{budget:,}" if budget else gettext("unlimited")


@admin.register(Group)
class BudgetedGroupAdmin(GroupAdmin):
    inlines = (*GroupAdmin.inlines, TokenBudgetInline)


@admin.register(TokenBudget)
class TokenBudgetAdmin(admin.ModelAdmin):
    """Every budget that differs from ARTIFACTFLOW_DAILY_TOKEN_BUDGET, for a user or a group."""

    list_display = ("__str__", "user", "group", "daily_tokens", "used_today")
    list_select_related = ("user", "group")
    search_fields = ("user__username", "group__name")
    autocomplete_fields = ("user", "group")

    @admin.display(description=_("tokens today"))
    def used_today(self, budget):
        return f"{tokens_today(user_id=budget.user_id):,}" if budget.user_id else "—"


@admin.register(TokenUse)
class TokenUseAdmin(ReadOnlyAdmin):
    """The day's use of each model by each kind of call, as counted
    (agents.usage): read-only; the usage page (/usage/) adds it up."""

    list_display = (
        "day",
        "user",
        "model",
        "kind",
        "calls",
        "estimated_calls",
        "input_tokens",
        "cached_tokens",
        "output_tokens",
    )
    list_select_related = ("user",)
    list_filter = ("day", "kind", "model")
    date_hierarchy = "day"
    search_fields = ("user__username", "model")
    ordering = ("-day", "user", "model", "kind")
    show_full_result_count = False

    def has_delete_permission(self, request, obj=None):
        # What was used stays used; a person's rows go with the person.
        return False


@admin.register(TokenSpend)
class TokenSpendAdmin(admin.ModelAdmin):
    """What each user's model calls spent a day (agents.budgets), as counted:
    read-only. Deleting a day's row gives that day's spending back to the user."""

    list_display = ("user", "day", "tokens")
    list_select_related = ("user",)
    list_filter = ("day",)
    date_hierarchy = "day"
    search_fields = ("user__username",)
    ordering = ("-day", "-tokens")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class ToolSourceForm(forms.ModelForm):
    """The form of any tool an administrator plugs in (agents.models.ToolSource):
    the agents as checkboxes, and the secret write-only: its value is never
    sent back to the browser, only whether one is set (ToolSourceAdmin). A
    change of where the secret would go (another origin, another command)
    needs the secret entered again or removed: whoever may change a URL must
    not be able to send a secret they do not know to a host of their choosing."""

    agents = forms.MultipleChoiceField(
        label=_("Agents"),
        choices=[(name, name) for name in AGENTS],
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text=_("The agents that may call it."),
    )
    new_secret = forms.CharField(
        label=_("New secret value"),
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=_(
            "Sent as the secret header's value, e.g. “Bearer …”, and only to the origin (scheme, host and port) "
            "of the URL it is entered with. Left empty, the stored secret is kept."
        ),
    )
    clear_secret = forms.BooleanField(label=_("Remove the stored secret"), required=False)

    def _post_clean(self):
        super()._post_clean()
        # The instance holds the new values by now, so its destination is where the secret would go.
        source = self.instance
        if (
            source.secret_moved
            and not self.cleaned_data.get("new_secret")
            and not self.cleaned_data.get("clear_secret")
        ):
            self.add_error(
                "new_secret",
                gettext(
                    "The stored secret was entered for %(old)s and would now go to %(new)s: enter it again for "
                    "%(new)s, or remove it."
                )
                % {"old": source.secret_destination or gettext("another destination"), "new": source.destination},
            )

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("new_secret") and cleaned.get("clear_secret"):
            raise forms.ValidationError(gettext("Give a new secret or remove it, not both."))
        if cleaned.get("new_secret") and not cleaned.get("secret_header"):
            self.add_error("secret_header", gettext("Name the header the secret is sent in."))
        return cleaned

    def save(self, commit=True):
        if self.cleaned_data.get("clear_secret"):
            self.instance.secret_set("")
        elif self.cleaned_data.get("new_secret"):
            self.instance.secret_set(self.cleaned_data["new_secret"])
        return super().save(commit)


class ToolSourceAdmin(admin.ModelAdmin):
    """What the admin of every kind of configured tool shares: its list, who may use it, its secret."""

    list_display = ("name", "enabled", "permission", "agent_list", "group_list", "secret_status")
    list_filter = ("enabled", "permission", "groups")
    search_fields = ("name", "description")
    filter_horizontal = ("groups",)
    readonly_fields = ("secret_status", "created_at", "updated_at")
    access_fieldset = (
        _("Who may use it"),
        {"fields": ("enabled", "permission", "agents", "groups")},
    )
    secret_fieldset = (
        _("Secret"),
        {"fields": ("secret_header", "secret_status", "new_secret", "clear_secret")},
    )

    # An error report of a failed save (ADMINS' e-mail) must not carry the secret typed in.
    @method_decorator(sensitive_post_parameters("new_secret"))
    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        return super().changeform_view(request, object_id, form_url, extra_context)

    @admin.display(description=_("agents"))
    def agent_list(self, source):
        return ", ".join(source.agents or []) or "—"

    @admin.display(description=_("groups"))
    def group_list(self, source):
        return ", ".join(group.name for group in source.groups.all()) or gettext("everyone")

    @admin.display(description=_("secret"))
    def secret_status(self, source):
        if not source.has_secret:
            return gettext("not set")
        if source.secret_moved:
            return gettext("set for %(origin)s, where this no longer goes: sent nowhere until it is entered again") % {
                "origin": source.secret_destination or gettext("another destination")
            }
        return gettext("set, for %(origin)s") % {"origin": source.secret_destination}

    # Test connection, on each source's page and as an action: each kind says what it tried (_report).
    change_form_template = "admin/agents/tool_source_change_form.html"
    actions = ["sources_test"]

    def _report(self, request, source) -> None:
        raise NotImplementedError

    def get_urls(self):
        opts = self.model._meta
        test = path(
            "<int:object_id>/test/",
            self.admin_site.admin_view(self.source_test_view),
            name=f"{opts.app_label}_{opts.model_name}_test",
        )
        return [test, *super().get_urls()]

    def source_test_view(self, request, object_id):
        source = get_object_or_404(self.model, pk=object_id)
        if request.method != "POST" or not self.has_change_permission(request, source):
            raise PermissionDenied
        self._report(request, source)
        opts = self.model._meta
        return redirect(f"admin:{opts.app_label}_{opts.model_name}_change", source.pk)

    @admin.action(description=_("Test connection"), permissions=["change"])
    def sources_test(self, request, queryset):
        for source in queryset:
            self._report(request, source)


@admin.register(HttpTool)
class HttpToolAdmin(ToolSourceAdmin):
    form = ToolSourceForm
    list_display = ("name", "method", "url_template", *ToolSourceAdmin.list_display[1:])

    def get_fieldsets(self, request, obj=None):
        return [
            (None, {"fields": ("name", "description", "method", "url_template", "parameters", "response_path")}),
            (_("Request"), {"fields": ("headers", "timeout")}),
            self.access_fieldset,
            self.secret_fieldset,
            (_("Record"), {"fields": ("created_at", "updated_at")}),
        ]

    def _report(self, request, tool) -> None:
        """One harmless request (agents.tools.http.http_tool_test), its outcome as a message."""
        report = http_tool_test(tool=tool)
        self.message_user(
            request,
            gettext("%(tool)s: %(request)s → %(outcome)s")
            % {"tool": tool.name, "request": report.request, "outcome": report.outcome},
            messages.SUCCESS if report.ok else messages.ERROR,
        )


class McpServerForm(ToolSourceForm):
    def clean(self):
        # The secret goes in a header over HTTP, in a variable over stdio: each needs its name.
        cleaned = super(ToolSourceForm, self).clean()
        if cleaned.get("new_secret") and cleaned.get("clear_secret"):
            raise forms.ValidationError(gettext("Give a new secret or remove it, not both."))
        if cleaned.get("new_secret"):
            if cleaned.get("transport") == McpServer.Transport.STDIO and not cleaned.get("secret_env"):
                self.add_error("secret_env", gettext("Name the variable the secret is passed in."))
            elif cleaned.get("transport") == McpServer.Transport.HTTP and not cleaned.get("secret_header"):
                self.add_error("secret_header", gettext("Name the header the secret is sent in."))
        return cleaned


@admin.register(McpServer)
class McpServerAdmin(ToolSourceAdmin):
    """MCP servers (agents.tools.mcp). A stdio server is a command the workers
    run as their own user: only superusers may see, add or change one."""

    form = McpServerForm
    list_display = ("name", "transport", "endpoint", *ToolSourceAdmin.list_display[1:])

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_superuser

    def has_add_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_superuser

    @admin.display(description=_("endpoint"))
    def endpoint(self, server):
        if server.transport == McpServer.Transport.HTTP:
            return server.url
        return " ".join([server.command, *(server.args or [])])

    def get_fieldsets(self, request, obj=None):
        return [
            (None, {"fields": ("name", "description", "transport", "timeout")}),
            (_("Streamable HTTP"), {"fields": ("url",)}),
            (_("Command (stdio)"), {"fields": ("command", "args", "env")}),
            self.access_fieldset,
            (_("Secret"), {"fields": ("secret_header", "secret_env", "secret_status", "new_secret", "clear_secret")}),
            (_("Record"), {"fields": ("created_at", "updated_at")}),
        ]

    def _report(self, request, server) -> None:
        """The server's tools listed now (agents.tools.mcp.mcp_server_test), as a message."""
        report = mcp_server_test(server=server)
        self.message_user(
            request,
            gettext("%(server)s → %(outcome)s") % {"server": server.name, "outcome": report.outcome},
            messages.SUCCESS if report.ok else messages.ERROR,
        )
