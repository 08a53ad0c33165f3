from django.apps import AppConfig
from django.db import transaction
from django.db.models.signals import post_delete


def _file_delete(sender, instance, **kwargs):
    # Deleting a conversation (or an artifact in the admin) removes the stored
    # original too, once the deletion is committed.
    if instance.file:
        storage, name = instance.file.storage, instance.file.name
        transaction.on_commit(lambda: storage.delete(name))


class ArtifactsConfig(AppConfig):
    name = "artifacts"

    def ready(self):
        post_delete.connect(_file_delete, sender="artifacts.Artifact", dispatch_uid="artifact-file-delete")
