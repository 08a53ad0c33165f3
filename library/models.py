from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

# Library documents are read through web_fetch under URLs like library://12.
LIBRARY_URL_PREFIX = "library://"


class LibraryDocument(models.Model):
    """A document of the team library, for every user's agents to find (or a group's).

    `content` is the text read from the file once, at upload: searches and
    agents read it, never the file. Full-text search is per database: an FTS5
    table kept in sync by triggers on SQLite, a GIN-indexed tsvector expression
    on Postgres (agents' migrations 0004 and 0009: the library began as part of
    agents, and its table keeps that name).
    """

    title = models.CharField(max_length=300)
    content = models.TextField()
    original_file = models.FileField(upload_to="library/", blank=True)
    content_type = models.CharField(max_length=100, default="text/markdown")
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # A document limited to a group is the group's (and its uploader's) alone: the
    # library page and every agent's search and fetch hide it from anyone else
    # (selectors.library_visible). PROTECT: deleting the group would
    # otherwise either lose its documents or show them to everyone.
    group = models.ForeignKey(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        verbose_name=_("visible to group"),
    )
    # A project's own document: searched and read only inside it
    # (selectors.library_visible). PROTECT: a project is deleted once its
    # documents are, never taking a person's upload with it unasked.
    project = models.ForeignKey(
        "projects.Project", null=True, blank=True, on_delete=models.PROTECT, related_name="documents"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Status(models.TextChoices):
        # Added with others (a .zip, several files): its text is read by a worker (library.tasks).
        QUEUED = "queued", _("queued")
        INDEXED = "indexed", _("indexed")
        FAILED = "failed", _("failed")

    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.INDEXED)
    # Why its text could not be read, for a failed document.
    error = models.TextField(_("why it failed"), blank=True)

    class Meta:
        db_table = "agents_librarydocument"
        ordering = ["title", "id"]

    def __str__(self):
        return self.title

    @property
    def url(self) -> str:
        return f"{LIBRARY_URL_PREFIX}{self.pk}"


class LibraryPassage(models.Model):
    """A few paragraphs of a document (library.passages): what search ranks
    and agents read around a hit, with where they are in the document.

    Kept in step with the document by library.services.library_passages_index,
    which a save of the document calls (library.signals; an update() of the
    table bypasses it, and library_reindex catches up). `title` is the
    document's, so a passage's index row holds all its search needs: an FTS5 table kept in sync
    by triggers on SQLite, a stored weighted tsvector with a GIN index on
    Postgres (migration 0002)."""

    document = models.ForeignKey(LibraryDocument, on_delete=models.CASCADE, related_name="passages")
    # 1 for the document's first passage: library://<document>#<number> names it.
    number = models.PositiveIntegerField()
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()
    # The headings it is under, outermost first (passages.HEADING_JOIN between).
    heading = models.CharField(max_length=1000, blank=True)
    # A PDF's page the passage starts on.
    page = models.PositiveIntegerField(null=True, blank=True)
    title = models.CharField(max_length=300)
    text = models.TextField()

    class Meta:
        ordering = ["document", "number"]
        constraints = [models.UniqueConstraint(fields=["document", "number"], name="library_passage_number")]

    def __str__(self):
        return f"{self.title} #{self.number}"

    @property
    def url(self) -> str:
        return f"{LIBRARY_URL_PREFIX}{self.document_id}#{self.number}"


class WebSnapshot(models.Model):
    """A web page as the crawl agent read it in a conversation: the text it
    extracted, where from and when, so a citation of the page opens what the
    agent read rather than whatever the page says by now (library.views).
    Kept by library.services.snapshot_keep, one per text of a URL in a
    conversation, and removed with the conversation or by retention."""

    conversation = models.ForeignKey("conversations.Conversation", on_delete=models.CASCADE, related_name="snapshots")
    # The page's address after redirects: the one the model was told it read.
    url = models.TextField()
    title = models.CharField(max_length=300, blank=True)
    content_type = models.CharField(max_length=100)
    text = models.TextField()
    # SHA-256 of the text: the same URL read twice alike is one snapshot.
    digest = models.CharField(max_length=64)
    # UTF-8 bytes of the text, so a conversation's snapshots are bounded without reading them.
    size = models.PositiveIntegerField()
    fetched_at = models.DateTimeField()

    class Meta:
        ordering = ["conversation", "-fetched_at"]
        # No unique (conversation, url, digest): a URL may be longer than
        # Postgres indexes; one conversation's turns run one at a time.
        indexes = [models.Index(fields=["conversation", "digest"], name="library_snapshot_digest")]

    def __str__(self):
        return self.title or self.url
