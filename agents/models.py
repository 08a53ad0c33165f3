from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from conversations.models import Message

from .source_checks import source_problems


class Run(models.Model):
    """The execution of one message's turn by the agents."""

    class Status(models.TextChoices):
        # Made to wait for one of its user's turns to end (agents.services.admission):
        # it holds no worker and no task of its own until it is admitted, queued.
        WAITING_SLOT = "waiting_slot"
        QUEUED = "queued"
        RUNNING = "running"
        WAITING_PERMISSION = "waiting_permission"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    ACTIVE_STATUSES = (Status.WAITING_SLOT, Status.QUEUED, Status.RUNNING, Status.WAITING_PERMISSION)
    # The statuses that hold one of the user's slots (ARTIFACTFLOW_TURNS_PER_USER): a
    # turn waiting for permission holds no worker, so it holds no slot either.
    ADMITTED_STATUSES = (Status.QUEUED, Status.RUNNING)

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    # The lead's model: its name at the model service, and its label in the
    # models file (empty for the environment's model). Set when the turn starts.
    model = models.CharField(max_length=200, blank=True)
    model_label = models.CharField(max_length=200, blank=True)
    # The lead model the conversation had chosen when the turn was asked
    # (Conversation.lead_model): a resumed turn keeps it.
    lead_model = models.CharField(max_length=100, blank=True)
    # Counts claims by a worker. It is also the fencing token: a worker writes
    # only while the run is running under the claim it made (agents.lease).
    attempts = models.PositiveIntegerField(default=0)
    # Times the run's worker was found dead; a claim after a permission answer is not one.
    worker_deaths = models.PositiveIntegerField(default=0)
    # The process executing the run ("host:pid"), so a worker starting on that
    # host can tell at once that the process is gone.
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    # The engine's state after its last step (agents.state.TurnState): what a
    # resumed run continues from.
    checkpoint = models.JSONField(default=dict, blank=True)
    # Set by the user; the engine checks it between steps and while streaming.
    cancel_requested = models.BooleanField(default=False)
    metrics = models.JSONField(default=dict, blank=True)
    # The failed or cancelled run this one tries again: at the same message,
    # or at a new branch beside it when that message had later turns (run_retry).
    retry_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retries")
    # The schedule that started this turn with no one watching (projects.schedules):
    # a tool set to confirm is skipped, not asked about, and the answer opens
    # with what changed since the schedule's last run.
    schedule = models.ForeignKey(
        "projects.Schedule", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs", editable=False
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When retention folded the ended run's events and cleared its checkpoint
    # (agents.services.retention); null until then.
    folded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["status", "heartbeat_at"]), models.Index(fields=["folded_at", "finished_at"])]
        # Stopping another person's turn is more than reading the run: the admin's cancel action needs this.
        permissions = [("cancel_run", "Can cancel any user's run")]

    def __str__(self):
        return f"run {self.pk} ({self.status})"

    @property
    def is_active(self):
        return self.status in self.ACTIVE_STATUSES


class TokenBudget(models.Model):
    """A daily token budget of one user or of one group, in place of
    ARTIFACTFLOW_DAILY_TOKEN_BUDGET (agents.services.admission.budget_of)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="token_budget"
    )
    group = models.OneToOneField(
        "auth.Group", null=True, blank=True, on_delete=models.CASCADE, related_name="token_budget"
    )
    daily_tokens = models.PositiveBigIntegerField(
        verbose_name=_("daily tokens"), help_text=_("Tokens a day, counted from local midnight; 0 is unlimited.")
    )

    class Meta:
        verbose_name = _("token budget")
        verbose_name_plural = _("token budgets")
        constraints = [
            models.CheckConstraint(
                condition=models.Q(user__isnull=False, group__isnull=True)
                | models.Q(user__isnull=True, group__isnull=False),
                name="token_budget_user_or_group",
            )
        ]

    def __str__(self):
        return f"{self.user or self.group}: {self.daily_tokens}"


class TokenSpend(models.Model):
    """The tokens one user's model calls spent on one local day
    (agents.budgets): a call's estimate is added as it starts and corrected
    to what the service reported as it ends. Kept apart from runs, so that
    deleting a conversation gives no budget back."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="token_spends", verbose_name=_("user")
    )
    day = models.DateField(_("day"))
    tokens = models.PositiveBigIntegerField(_("tokens"), default=0)

    class Meta:
        verbose_name = _("tokens spent")
        verbose_name_plural = _("tokens spent")
        constraints = [models.UniqueConstraint(fields=["user", "day"], name="token_spend_user_day")]

    def __str__(self):
        return f"{self.user} on {self.day}: {self.tokens}"


class TokenUse(models.Model):
    """What one user's model calls of one kind, to one model, used on one
    local day: the rollup the usage page adds up (agents.usage), so that its
    figures never need a scan of the runs. Written as each call ends
    (agents.budgets.spend_settle); a call whose service reported no usage is
    counted at its estimate and in `estimated_calls`."""

    day = models.DateField(_("day"))
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="token_uses", verbose_name=_("user")
    )
    # The model's name at its service, as runs and metrics record it.
    model = models.CharField(_("model"), max_length=200)
    # An agent's steps (lead_agent, search_agent, crawl_agent), or compaction or title.
    kind = models.CharField(_("kind"), max_length=40)
    calls = models.PositiveIntegerField(_("calls"), default=0)
    estimated_calls = models.PositiveIntegerField(_("calls counted at their estimate"), default=0)
    # Input tokens billed at the input price: the prompt's tokens less the cached ones.
    input_tokens = models.PositiveBigIntegerField(_("input tokens"), default=0)
    cached_tokens = models.PositiveBigIntegerField(_("cached input tokens"), default=0)
    output_tokens = models.PositiveBigIntegerField(_("output tokens"), default=0)

    class Meta:
        verbose_name = _("token use")
        verbose_name_plural = _("token use")
        constraints = [
            models.UniqueConstraint(fields=["day", "user", "model", "kind"], name="token_use_day_user_model_kind")
        ]
        # A person's own figures (Settings): their days, without reading everyone's.
        indexes = [models.Index(fields=["user", "day"])]

    def __str__(self):
        return f"{self.user} on {self.day}: {self.model} {self.kind}"


class RunEvent(models.Model):
    """One entry of a run's event log; the vocabulary is seed 004's (docs/events.md),
    each type's `data` declared in agents.event_schema."""

    class Type(models.TextChoices):
        METADATA = "metadata"
        AGENT_START = "agent_start"
        LLM_CHUNK = "llm_chunk"
        LLM_COMPLETE = "llm_complete"
        LLM_RETRY = "llm_retry"
        COMPACTION_START = "compaction_start"
        COMPACTION = "compaction"
        AGENT_COMPLETE = "agent_complete"
        TOOL_START = "tool_start"
        TOOL_COMPLETE = "tool_complete"
        PERMISSION_REQUEST = "permission_request"
        PERMISSION_RESULT = "permission_result"
        COMPLETE = "complete"
        ERROR = "error"

    TERMINAL_TYPES = (Type.COMPLETE, Type.ERROR)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=30, choices=Type.choices)
    agent = models.CharField(max_length=100, blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="event_seq_unique_per_run")]
        # Events are never deleted one by one (the admin's delete stays off);
        # the admin's purge of finished runs' streamed text needs this.
        permissions = [("purge_chunks", "Can purge the streamed text of finished runs")]

    def __str__(self):
        return f"{self.run_id}#{self.seq} {self.type}"


class RunNotice(models.Model):
    """A turn's end told to someone besides its conversation's owner: a reader
    of the project a scheduled turn ran in (projects.signals). Their list marks
    the conversation as the owner's is marked, until they look at it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="notices")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="run_notices")
    created_at = models.DateTimeField(auto_now_add=True)
    seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "user"], name="run_notice_unique_per_user")]
        indexes = [models.Index(fields=["user", "seen_at"])]

    def __str__(self):
        return f"run {self.run_id} → {self.user}"


# A configured tool's name as the model calls it: never with "__", which names
# the tools of an MCP server (<server>__<tool>), so the two never collide.
TOOL_NAME_VALIDATOR = RegexValidator(
    r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$",
    _("Lower-case letters, digits and single underscores, starting with a letter (no “__”)."),
)


def _lead_only() -> list[str]:
    return ["lead_agent"]


class ToolSource(models.Model):
    """What every tool an administrator plugs in shares, whatever kind it is
    (an HTTP tool, an MCP server yielding several): who may use it, when the
    user must confirm a call, how long a call may take, and one secret header
    (agents.secrets) sent with its requests. The secret is stored encrypted and
    only read (secret_read) when a request is made, and only for where it was
    entered to go (`destination`: a URL's origin), so that whoever may change
    the URL cannot send the secret elsewhere without knowing it."""

    class Permission(models.TextChoices):
        AUTO = "auto", _("Run without asking")
        CONFIRM = "confirm", _("Ask the user before each call")

    name = models.CharField(_("name"), max_length=60, unique=True, validators=[TOOL_NAME_VALIDATOR])
    description = models.TextField(_("description"), help_text=_("What the tool does, for the model to choose it."))
    enabled = models.BooleanField(_("enabled"), default=True)
    permission = models.CharField(
        _("permission"), max_length=10, choices=Permission.choices, default=Permission.CONFIRM
    )
    # Names of agents.config.AGENTS; checked by the admin's form.
    agents = models.JSONField(_("agents"), default=_lead_only, blank=True)
    groups = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="+",
        verbose_name=_("groups"),
        help_text=_("Only conversations of members of these groups may use it; none: everyone's."),
    )
    timeout = models.PositiveSmallIntegerField(
        _("timeout (seconds)"), default=20, validators=[MinValueValidator(1), MaxValueValidator(120)]
    )
    secret_header = models.CharField(
        _("secret header"),
        max_length=100,
        blank=True,
        help_text=_("The header the secret is sent in, e.g. Authorization."),
    )
    # The Fernet token of the secret header's value; never shown, never logged.
    secret_encrypted = models.TextField(blank=True, editable=False)
    # Where the secret was entered to go (`destination` when it was set): it is read for nowhere else.
    secret_destination = models.CharField(max_length=2100, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["name"]

    def __str__(self):
        return self.name

    @property
    def has_secret(self) -> bool:
        return bool(self.secret_encrypted)

    @property
    def destination(self) -> str:
        """Where the secret would go now: the origin (scheme://host:port) of a URL, or a command."""
        raise NotImplementedError

    @property
    def secret_moved(self) -> bool:
        """Whether the secret was entered for another destination than this source's now."""
        return self.has_secret and self.secret_destination != self.destination

    def secret_set(self, value: str) -> None:
        """Store `value` encrypted, for the source's destination now; an empty value removes the secret."""
        from .secrets import secret_encrypt

        self.secret_encrypted = secret_encrypt(value) if value else ""
        self.secret_destination = self.destination if value else ""

    def secret_read(self) -> str:
        """The secret in plain text, for the request being made; SecretError
        when it cannot be read, or when it was entered for another destination."""
        from .secrets import SecretError, secret_decrypt

        if self.secret_moved:
            raise SecretError(
                f"its secret was entered for {self.secret_destination or 'another destination'} and would now go to "
                f"{self.destination}; it goes only where it was entered for: an administrator must enter it again"
            )
        return secret_decrypt(self.secret_encrypted) if self.secret_encrypted else ""

    def clean(self):
        # The check is its kind's tool code (agents.source_checks).
        problems = source_problems(source=self)
        if problems:
            raise ValidationError(problems)


class HttpTool(ToolSource):
    """A declarative tool for an internal REST endpoint (agents.tools.http,
    docs/tools.md): the URL's scheme and host are the administrator's, and each
    parameter goes where its schema's "x-in" says: path, query or body."""

    class Method(models.TextChoices):
        GET = "GET", "GET"
        POST = "POST", "POST"
        PUT = "PUT", "PUT"
        PATCH = "PATCH", "PATCH"
        DELETE = "DELETE", "DELETE"

    method = models.CharField(_("method"), max_length=10, choices=Method.choices, default=Method.GET)
    url_template = models.CharField(
        _("URL template"),
        max_length=2000,
        help_text=_("e.g. https://tickets.internal/api/tickets/{ticket_id}; {name} only in the path."),
    )
    headers = models.JSONField(
        _("headers"), default=dict, blank=True, help_text=_("Headers sent with every call; not secret.")
    )
    parameters = models.JSONField(
        _("parameters"),
        default=dict,
        help_text=_('JSON Schema of the arguments; each property says where it goes: "x-in": path, query or body.'),
    )
    response_path = models.CharField(
        _("response extraction"),
        max_length=500,
        blank=True,
        help_text=_("Of a JSON answer, only this part: a dotted path (data.items) or a JSON pointer (/data/items)."),
    )

    class Meta(ToolSource.Meta):
        verbose_name = _("HTTP tool")
        verbose_name_plural = _("HTTP tools")

    @property
    def destination(self) -> str:
        from .secrets import url_origin

        return url_origin(self.url_template)


class McpServer(ToolSource):
    """A Model Context Protocol server whose tools the agents may call
    (agents.tools.mcp, docs/tools.md), each named <server>__<tool>. Over stdio
    the portal starts the administrator's command on the worker's machine, as
    the worker's user: only superusers may configure one (agents.admin)."""

    class Transport(models.TextChoices):
        STDIO = "stdio", _("A command the portal starts (stdio)")
        HTTP = "http", _("A server at a URL (streamable HTTP)")

    transport = models.CharField(_("transport"), max_length=10, choices=Transport.choices, default=Transport.HTTP)
    url = models.CharField(
        _("URL"), max_length=2000, blank=True, help_text=_("Streamable HTTP: e.g. https://mcp.internal/mcp.")
    )
    command = models.CharField(
        _("command"), max_length=500, blank=True, help_text=_("stdio: the program to start, e.g. /usr/bin/uvx.")
    )
    args = models.JSONField(
        _("arguments"), default=list, blank=True, help_text=_('stdio: a JSON list, e.g. ["my-mcp-server", "--ro"].')
    )
    env = models.JSONField(
        _("environment"),
        default=dict,
        blank=True,
        help_text=_("stdio: variables added to the command's environment; not secret."),
    )
    secret_env = models.CharField(
        _("secret variable"),
        max_length=100,
        blank=True,
        help_text=_("stdio: the environment variable the secret is passed in, e.g. API_TOKEN."),
    )

    class Meta(ToolSource.Meta):
        verbose_name = _("MCP server")
        verbose_name_plural = _("MCP servers")

    @property
    def destination(self) -> str:
        from .secrets import url_origin

        if self.transport == self.Transport.HTTP:
            return url_origin(self.url)
        return f"the command {self.command}"
