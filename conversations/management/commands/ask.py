import sys

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from agents.models import Run, RunEvent
from agents.selectors import LEAD_AGENT
from agents.services.execution import run_execute
from agents.services.permissions import permission_answer
from agents.state import PendingRequest, PermissionDecision, pending_request
from artifacts.models import Artifact
from conversations import lifecycle, selectors
from conversations.management.commands.demo_user import DEMO_USERNAME
from conversations.models import Message

ANSWERS = {
    "y": PermissionDecision.APPROVE,
    "yes": PermissionDecision.APPROVE,
    "a": PermissionDecision.ALWAYS,
    "always": PermissionDecision.ALWAYS,
    "n": PermissionDecision.DENY,
    "no": PermissionDecision.DENY,
    "": PermissionDecision.DENY,
}


class Command(BaseCommand):
    help = (
        "Ask a question and print the answer as it streams, then the ids of the "
        "conversation's artifacts. The turn runs in this process through the same "
        "service and task code as the portal's workers. A tool that needs permission "
        "is asked about on the terminal; with no terminal it is denied."
    )
    # Tests hand in a terminal of their own.
    stealth_options = ("stdin",)

    def add_arguments(self, parser):
        parser.add_argument("question")
        parser.add_argument("--user", help="username (default: the only user, else the demo login)")
        parser.add_argument("--conversation", help="continue this conversation (default: a new one)")
        parser.add_argument("--parent", type=int, help="branch from this message of the conversation")
        parser.add_argument(
            "--auto-approve", action="store_true", help="allow every tool call that asks for permission"
        )

    def handle(self, *args, question, user, conversation, parent, auto_approve, **options):
        self.stdin = options.get("stdin") or sys.stdin
        owner = self._user(user)
        try:
            if conversation:
                found = selectors.conversation_get(user=owner, conversation_id=conversation)
                if found is None:
                    raise CommandError(f"{owner} has no conversation {conversation}.")
                branch_from = lifecycle.ACTIVE_BRANCH
                if parent is not None:
                    branch_from = Message.objects.filter(conversation=found, pk=parent).first()
                    if branch_from is None:
                        raise CommandError(f"Conversation {conversation} has no message {parent}.")
                message = lifecycle.message_post(
                    conversation=found, content=question, parent=branch_from, enqueue=False
                )
            else:
                if parent is not None:
                    raise CommandError("--parent needs --conversation.")
                message = lifecycle.conversation_start(user=owner, content=question, enqueue=False).active_branch
        except ValidationError as exc:
            raise CommandError(exc.messages[0]) from exc

        run = run_execute(run_id=message.runs.get().pk, on_event=self._print_chunk)
        while run.status == Run.Status.WAITING_PERMISSION:
            pending = pending_request(run.checkpoint)
            decision = PermissionDecision.APPROVE if auto_approve else self._permission_ask(pending)
            # This process resumes the run itself, so no worker is asked to.
            permission_answer(run_id=run.pk, user=owner, request_id=pending.id, decision=decision, enqueue=False)
            run = run_execute(run_id=run.pk, on_event=self._print_chunk)
        self.stdout.write("")
        if run.status != Run.Status.COMPLETED:
            raise CommandError(run.error or f"The turn ended {run.status}.")
        artifacts = Artifact.objects.filter(session__conversation=message.conversation_id).order_by("created_at")
        for artifact in artifacts:
            self.stdout.write(f"artifact {artifact.artifact_id} (version {artifact.current_version}): {artifact.title}")
        self.stderr.write(f"conversation {message.conversation_id}, message {message.pk}")

    def _permission_ask(self, pending: PendingRequest) -> PermissionDecision:
        params = ", ".join(f"{key}={value!r}" for key, value in pending.params.items())
        request = f"{pending.agent} wants to call {pending.tool}({params})"
        if not self.stdin.isatty():
            self.stderr.write(f"\n{request}: denied, there is no terminal to ask on (pass --auto-approve to allow).")
            return PermissionDecision.DENY
        while True:
            self.stderr.write(f"\n{request}. Allow? [y]es / [n]o / [a]lways in this branch: ", ending="")
            self.stderr.flush()
            line = self.stdin.readline()
            if not line:
                return PermissionDecision.DENY
            answer = ANSWERS.get(line.strip().lower())
            if answer is not None:
                return answer

    def _user(self, username):
        users = get_user_model().objects
        if username:
            try:
                return users.get(username=username)
            except users.model.DoesNotExist:
                raise CommandError(f"No user named {username!r}.") from None
        first_two = list(users.order_by("pk")[:2])
        if not first_two:
            raise CommandError(
                "There is no user yet: `make run` creates the demo login, or run manage.py createsuperuser."
            )
        if len(first_two) == 1:
            chosen, why = first_two[0], "the only user"
        else:
            chosen, why = users.filter(username=DEMO_USERNAME).first(), "the demo login"
            if chosen is None:
                raise CommandError("There are several users: name the one to ask as with --user.")
        self.stderr.write(f"Asking as {chosen.username}, {why} (--user names another).")
        return chosen

    def _print_chunk(self, event):
        if event.type == RunEvent.Type.LLM_CHUNK and event.agent == LEAD_AGENT:
            self.stdout.write(event.data["content"], ending="")
            self.stdout.flush()
