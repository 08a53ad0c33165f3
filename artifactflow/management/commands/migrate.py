"""Django's migrate, which on the embedded default first makes the data
directory's secret key (artifactflow.datadir): the settings only read it."""

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.commands import migrate

from artifactflow.datadir import local_secret_key_make


class Command(migrate.Command):
    def execute(self, *args, **options):
        try:
            settings.SECRET_KEY  # noqa: B018
        except ImproperlyConfigured:
            # Empty only on the embedded default (artifactflow.settings); this
            # process needs it too: migrate's own checks come first.
            settings.SECRET_KEY = local_secret_key_make(data_dir=settings.DATA_DIR)
        return super().execute(*args, **options)
