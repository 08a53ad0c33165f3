from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from agents.selectors import session_active_runs
from artifacts.cleanup import artifact_delete_plan, bytes_text
from artifacts.models import Artifact
from artifacts.services import artifact_delete


class Command(BaseCommand):
    help = (
        "Delete one artifact of a conversation with every version on every branch and its file. "
        "A dry run unless --apply. Refused while a running turn is writing it."
    )

    def add_arguments(self, parser):
        parser.add_argument("conversation", metavar="CONVERSATION_ID")
        parser.add_argument("artifact_id", metavar="ARTIFACT_ID")
        parser.add_argument("--apply", action="store_true", help="Delete it; without it nothing changes.")

    def handle(self, *args, conversation, artifact_id, apply, **options):
        try:
            candidate = artifact_delete_plan(conversation_id=conversation, artifact_id=artifact_id)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        about = (
            f"artifact {candidate.artifact_id} ({candidate.title}) [{candidate.source}] "
            f"of conversation {candidate.conversation_id}, {bytes_text(candidate.bytes)}"
        )
        if not apply:
            self.stdout.write(f"Would delete {about}.")
            self.stdout.write("Dry run: nothing was deleted. Run again with --apply to delete it.")
            return
        try:
            artifact = Artifact.objects.get(pk=candidate.artifact_pk)
            artifact_delete(artifact=artifact, active_runs=session_active_runs(session_id=artifact.session_id))
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(f"Deleted {about}.")
