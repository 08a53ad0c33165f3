"""Cuts every library document into passages again: after a release changes
how documents are cut (library.passages), or after documents were loaded
without their passages (a raw fixture, a restore of the document table alone)."""

from django.core.management.base import BaseCommand

from library.models import LibraryDocument
from library.services import library_passages_index


class Command(BaseCommand):
    help = "Cut every library document into passages again, for search."

    def handle(self, *args, **options):
        documents = passages = 0
        for document in LibraryDocument.objects.order_by("pk").iterator(chunk_size=100):
            passages += library_passages_index(document=document)
            documents += 1
        self.stdout.write(f"Indexed {documents:,} documents in {passages:,} passages.")
