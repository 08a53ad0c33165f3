"""A document's passages follow its text and title whatever saves it: the
Library page, the admin, the samples command, a shell. As the search index's
triggers do for the text itself."""

from django.db.models.signals import post_save
from django.dispatch import receiver

from .models import LibraryDocument
from .services import library_passages_index
from .vectors import vectors_index_queue


@receiver(post_save, sender=LibraryDocument)
def passages_follow_document(sender, instance, created, update_fields=None, raw=False, **kwargs):
    # A fixture loaded raw is indexed by library_reindex; a save of other fields changes no passage.
    if raw or (update_fields is not None and not {"title", "content", "content_type"} & set(update_fields)):
        return
    library_passages_index(document=instance)
    # New passages get vectors, where an embeddings model is configured.
    vectors_index_queue()
