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
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "agents_librarydocument"
        ordering = ["title", "id"]

    def __str__(self):
        return self.title

    @property
    def url(self) -> str:
        return f"{LIBRARY_URL_PREFIX}{self.pk}"
