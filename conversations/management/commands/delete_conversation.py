from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from agents.selectors import conversations_busy
from artifacts.cleanup import SESSION_ACTIVE, bytes_text, session_delete_plan
from conversations.lifecycle import conversation_delete


class Command(BaseCommand):
    help = (
        "Delete a conversation with its messages, runs, events and artifacts (with their files). "
        "A dry run unless --apply. Refused while a turn is queued, running or waiting for permission."
    )

    def add_arguments(self, parser):
        parser.add_argument("conversation", metavar="CONVERSATION_ID")
        parser.add_argument("--apply", action="store_true", help="Delete it; without it nothing changes.")

    def handle(self, *args, conversation, apply, **options):
        try:
            plan = session_delete_plan(conversation_id=conversation, busy=conversations_busy())
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        about = (
            f"conversation {plan.conversation.pk} ({plan.conversation}) of {plan.conversation.owner.get_username()}: "
            f"{plan.messages} messages, {plan.runs} runs, {len(plan.artifacts)} artifacts, {bytes_text(plan.bytes)}"
        )
        if not apply:
            self.stdout.write(f"Would delete {about}.")
            if plan.active:
                raise CommandError(f"It would be refused: {SESSION_ACTIVE}")
            self.stdout.write("Dry run: nothing was deleted. Run again with --apply to delete it.")
            return
        try:
            conversation_delete(conversation=plan.conversation)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(f"Deleted {about}.")
