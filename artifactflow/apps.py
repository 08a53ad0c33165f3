from django.apps import AppConfig

from . import checks, db, descriptors  # noqa: F401 (checks registers the portal's system checks)


class ArtifactflowConfig(AppConfig):
    name = "artifactflow"

    def ready(self):
        # Every process: web, worker and manage.py alike.
        descriptors.descriptor_limit_raise()
        db.pool_fork_guard()
