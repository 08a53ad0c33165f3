"""The library's system checks."""

from django.conf import settings
from django.core.checks import Warning, register
from django.db import connection


@register
def embeddings_database_check(app_configs, **kwargs):
    """An embeddings model named for a Postgres portal does nothing yet: say
    so, rather than let an operator believe passages are found by meaning."""
    if settings.EMBEDDINGS["model"] and connection.vendor != "sqlite":
        return [
            Warning(
                "ARTIFACTFLOW_EMBEDDINGS_MODEL is set, but the library's vectors are kept with sqlite-vec, "
                "on the embedded SQLite database only: this portal searches the library by its words alone.",
                hint="Unset ARTIFACTFLOW_EMBEDDINGS_MODEL, or run on SQLite for vectors.",
                id="library.W001",
            )
        ]
    return []
