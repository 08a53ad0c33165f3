from django.core.management.base import BaseCommand
from django.db import connection

from agents.services.retention import retention_sweep


class Command(BaseCommand):
    help = (
        "Fold every ended run that is due and expire idle conversations' events now, as the "
        "retention schedule does a minute's worth at a time. With --vacuum, then rewrite a SQLite "
        "file to its size (VACUUM): writers wait while it runs, so choose a quiet hour; it also "
        "switches on the incremental vacuum of a file made before it was set."
    )

    def add_arguments(self, parser):
        parser.add_argument("--vacuum", action="store_true", help="VACUUM the SQLite file afterwards.")

    def handle(self, *args, vacuum=False, **options):
        done = retention_sweep(seconds=None)
        self.stdout.write(
            f"Folded {done['folded']} runs ({done['chunks_deleted']} streamed-text rows deleted); "
            f"deleted {done['expired']} events of idle conversations."
        )
        if not vacuum:
            return
        if connection.vendor != "sqlite":
            self.stdout.write("Nothing to vacuum: Postgres's autovacuum reuses the space of deleted rows.")
            return
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
            cursor.execute("VACUUM")
        self.stdout.write("The SQLite file was vacuumed.")
