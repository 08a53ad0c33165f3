from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from agents.selectors import conversations_busy
from artifacts.cleanup import CleanupCandidate, bytes_text, cleanup_apply, cleanup_plan


def _line(candidate: CleanupCandidate) -> str:
    return f"{candidate.conversation_id} {candidate.artifact_id} [{candidate.source}] {bytes_text(candidate.bytes)}"


class Command(BaseCommand):
    help = (
        "Remove run artifacts (tool results and subagent reports stored because they were too long), "
        "with their versions and files, and report files no artifact refers to. A dry run unless --apply: "
        "it lists what --apply would remove. See docs/cleanup.md."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--conversation",
            action="append",
            dest="conversations",
            metavar="ID",
            help="Only this conversation (repeatable).",
        )
        parser.add_argument(
            "--older-than", type=int, metavar="DAYS", help="Only artifacts last changed more than DAYS days ago."
        )
        parser.add_argument("--max-bytes", type=int, metavar="N", help="Free at most N bytes, oldest artifacts first.")
        parser.add_argument(
            "--include-all", action="store_true", help="The agents' and users' artifacts too (reports, plans, uploads)."
        )
        parser.add_argument("--delete-orphans", action="store_true", help="Delete the orphaned files too.")
        parser.add_argument("--apply", action="store_true", help="Remove what is listed; without it nothing changes.")

    def handle(self, *args, conversations, older_than, max_bytes, include_all, delete_orphans, apply, **options):
        try:
            plan = cleanup_plan(
                busy=conversations_busy(),
                conversation_ids=conversations,
                older_than_days=older_than,
                max_bytes=max_bytes,
                include_all=include_all,
            )
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        if apply:
            report = cleanup_apply(plan=plan, busy=conversations_busy(), delete_orphans=delete_orphans)
            for candidate in report.removed:
                self.stdout.write(f"removed {_line(candidate)}")
            for candidate, reason in report.skipped:
                self.stdout.write(f"skipped {_line(candidate)}: {reason}")
        else:
            self.stdout.write("Dry run: nothing is removed. Run again with --apply to remove what is listed.")
            for candidate in plan.candidates:
                self.stdout.write(f"would remove {_line(candidate)}")
        for conversation_id, reason in plan.refused:
            self.stdout.write(f"refused {conversation_id}: {reason}")
        for name in plan.orphaned_files:
            if not delete_orphans:
                fate = "kept (--delete-orphans deletes it)"
            elif not apply:
                fate = "would be deleted"
            else:
                fate = "deleted" if name in report.orphans_deleted else "kept: an artifact refers to it now"
            self.stdout.write(f"orphaned file {name}: {fate}")
        if plan.orphaned_files:
            self.stdout.write(f"Orphaned files: {len(plan.orphaned_files)}, {bytes_text(plan.orphaned_bytes)}.")
        if plan.over_limit:
            left = sum(candidate.bytes for candidate in plan.over_limit)
            self.stdout.write(
                f"{len(plan.over_limit)} more candidates ({bytes_text(left)}) are past --max-bytes; a later pass takes them."
            )
        if apply:
            self.stdout.write(f"Freed {bytes_text(report.bytes)} from {len(report.removed)} artifacts.")
        else:
            self.stdout.write(f"Would free {bytes_text(plan.bytes)} from {len(plan.candidates)} artifacts.")
