from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from artifactflow.backups import BackupRefused, backup_restore


class Command(BaseCommand):
    help = (
        "Restore a backup written by `backup` into an empty data directory (embedded default) or an empty "
        "database and media directory. Then run `migrate`, which brings an older backup up to this version."
    )
    # The checks may open the database, and on SQLite opening it makes the file the restore must write.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("source", type=Path, help="the backup file")

    def handle(self, *args, source: Path, **options):
        try:
            manifest = backup_restore(source=source)
        except BackupRefused as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"Restored the backup of {manifest['created_at']} ({len(manifest['members'])} files). "
            "Run `manage.py migrate` next."
        )
