"""Puts the sample documents in the team library, so a fresh install (and the
offline demo, which searches the library) has something to find."""

from pathlib import Path

from django.core.management.base import BaseCommand

from library.models import LibraryDocument
from library.services import library_document_create

SAMPLES_DIR = Path(__file__).resolve().parents[2] / "samples"


class Command(BaseCommand):
    help = "Add the sample documents to the team library; documents already there are left alone."

    def handle(self, *args, **options):
        for path in sorted(SAMPLES_DIR.glob("*.md")):
            content = path.read_text(encoding="utf-8")
            # Each sample starts with its "# Title" line.
            title = content.splitlines()[0].removeprefix("# ").strip()
            if LibraryDocument.objects.filter(title=title).exists():
                self.stdout.write(f"Already in the library: {title}")
                continue
            document = library_document_create(user=None, title=title, content=content)
            self.stdout.write(f"Added {title} ({document.url})")
