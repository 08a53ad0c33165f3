from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from agents.models import Run, RunEvent
from agents.selectors import LEAD_AGENT
from agents.services import run_execute
from conversations import selectors, services
from conversations.models import Message


class Command(BaseCommand):
    help = (
        "Ask a question and print the answer as it streams. The turn runs in this "
        "process through the same service and task code as the portal's workers."
    )

    def add_arguments(self, parser):
        parser.add_argument("question")
        parser.add_argument("--user", help="username (default: the only user, if there is one)")
        parser.add_argument("--conversation", help="continue this conversation (default: a new one)")
        parser.add_argument("--parent", type=int, help="branch from this message of the conversation")

    def handle(self, *args, question, user, conversation, parent, **options):
        owner = self._user(user)
        try:
            if conversation:
                found = selectors.conversation_get(user=owner, conversation_id=conversation)
                if found is None:
                    raise CommandError(f"{owner} has no conversation {conversation}.")
                branch_from = services.ACTIVE_BRANCH
                if parent is not None:
                    branch_from = Message.objects.filter(conversation=found, pk=parent).first()
                    if branch_from is None:
                        raise CommandError(f"Conversation {conversation} has no message {parent}.")
                message = services.message_post(
                    conversation=found, content=question, parent=branch_from, enqueue=False
                )
            else:
                if parent is not None:
                    raise CommandError("--parent needs --conversation.")
                message = services.conversation_start(user=owner, content=question, enqueue=False).active_branch
        except ValidationError as exc:
            raise CommandError(exc.messages[0]) from exc

        run = run_execute(run_id=message.runs.get().pk, on_event=self._print_chunk)
        self.stdout.write("")
        if run.status != Run.Status.COMPLETED:
            raise CommandError(run.error or f"The turn ended {run.status}.")
        self.stderr.write(f"conversation {message.conversation_id}, message {message.pk}")

    def _user(self, username):
        users = get_user_model().objects
        if username:
            try:
                return users.get(username=username)
            except users.model.DoesNotExist:
                raise CommandError(f"No user named {username!r}.") from None
        if users.count() != 1:
            raise CommandError("Name the user to ask as with --user.")
        return users.get()

    def _print_chunk(self, event):
        if event.type == RunEvent.Type.LLM_CHUNK and event.agent == LEAD_AGENT:
            self.stdout.write(event.data["content"], ending="")
            self.stdout.flush()
