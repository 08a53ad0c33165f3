from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from artifactflow.backups import BackupRefused, backup_write


class Command(BaseCommand):
    help = (
        "Write a backup of the portal to one file: the database (copied while the portal runs), the uploaded "
        "files and, on the embedded default, the data directory's secret key. Restore it with `restore`."
    )

    def add_arguments(self, parser):
        parser.add_argument("destination", type=Path, help="the file to write (e.g. artifactflow-2026-11-30.tar)")

    def handle(self, *args, destination: Path, **options):
        if destination.exists():
            raise CommandError(f"{destination} exists already: name a new file.")
        try:
            written = backup_write(destination=destination)
        except BackupRefused as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"Wrote {written.path}: {written.members} files, {written.size:,} bytes.")
