"""Django's migrate, which on the embedded default first makes the data
directory's secret key (artifactflow.datadir): the settings only read it."""

from django.conf import settings
from django.core.management.commands import migrate

from artifactflow.checks import secret_key_set
from artifactflow.datadir import local_secret_key_make


class Command(migrate.Command):
    def execute(self, *args, **options):
        if not secret_key_set():
            # Unset only on the embedded default (artifactflow.settings); this
            # process needs it too: migrate's own checks come first.
            settings.SECRET_KEY = local_secret_key_make(data_dir=settings.DATA_DIR)
        return super().execute(*args, **options)
