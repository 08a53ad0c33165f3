"""Cuts every library document into passages again: after a release changes
how documents are cut (library.passages), or after documents were loaded
without their passages (a raw fixture, a restore of the document table alone).
Where an embeddings model is configured, then gives every passage its vector
(library.vectors), batch by batch until none is left; stopped, it goes on
from there the next time."""

from django.core.management.base import BaseCommand, CommandError

from library.models import LibraryDocument
from library.services import library_passages_index
from library.vectors import vectors_enabled, vectors_index


class Command(BaseCommand):
    help = "Cut every library document into passages again, for search."

    def handle(self, *args, **options):
        documents = passages = 0
        for document in LibraryDocument.objects.order_by("pk").iterator(chunk_size=100):
            passages += library_passages_index(document=document)
            documents += 1
        self.stdout.write(f"Indexed {documents:,} documents in {passages:,} passages.")
        if not vectors_enabled():
            return
        embedded = 0
        while True:
            indexed = vectors_index()
            embedded += indexed.embedded
            if indexed.error:
                raise CommandError(f"{indexed.error}; {embedded:,} passages were given vectors; run it again to go on.")
            if not indexed.left:
                break
        self.stdout.write(f"Gave {embedded:,} passages their vectors.")
