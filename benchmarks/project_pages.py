"""What projects cost the pages that show them. A user with 1,000
conversations and none in a project (the baseline, as benchmarks/pages.py
measures it) against the same 1,000 in 20 projects of 50 each, 10 of them
shared with a reader through a group: the chat page (its sidebar lists every
project with its latest five), a conversation's page, a project's page (50
conversations, 50 reports), and the marks every page reads, for the owner and
for a reader told of 200 scheduled turns; and the read rule a reader's every
request of a conversation goes through (`conversation_viewable`), let in by a
share (the baseline) and by a project's group."""

import time

from setup_django import setup

setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.models import Group  # noqa: E402
from django.urls import reverse  # noqa: E402
from pages import _analyze, _client, _conversations, _timed  # noqa: E402

from agents.models import Run, RunNotice  # noqa: E402
from agents.selectors import conversation_marks  # noqa: E402
from conversations.models import Conversation, ConversationShare, Message  # noqa: E402
from conversations.selectors import conversation_viewable  # noqa: E402
from projects.models import Project, ProjectMember  # noqa: E402

PROJECTS, PER_PROJECT = 20, 50
MARKS_CALLS = 200


def _marks_seconds(user) -> float:
    started = time.perf_counter()
    for _ in range(MARKS_CALLS):
        conversation_marks(user=user)
    return (time.perf_counter() - started) / MARKS_CALLS


def _viewable_seconds(user, conversation) -> float:
    started = time.perf_counter()
    for _ in range(MARKS_CALLS):
        assert conversation_viewable(user=user, conversation_id=conversation.pk) is not None
    return (time.perf_counter() - started) / MARKS_CALLS


def _pages(user, *, project=None) -> dict[str, tuple[float, int, int]]:
    client = _client(user)
    conversation = Conversation.objects.filter(owner=user).order_by("-updated_at").first()
    measured = {
        "chat page": _timed(client, reverse("chat")),
        "a conversation's page": _timed(client, conversation.get_absolute_url()),
    }
    if project is not None:
        measured["a project's page (50 conversations and reports)"] = _timed(client, project.get_absolute_url())
    return measured


def main():
    users = get_user_model().objects
    owner, reader = (users.create(username=f"bench-projects-{name}") for name in ("owner", "reader"))
    group = Group.objects.create(name="bench-projects-readers")
    reader.groups.add(group)
    try:
        conversations = _conversations(owner, PROJECTS * PER_PROJECT, matching_every=2)
        _analyze()
        baseline = _pages(owner)
        baseline_marks = _marks_seconds(owner)

        projects = Project.objects.bulk_create(
            Project(owner=owner, name=f"Project {i}", instructions="Figures first.") for i in range(PROJECTS)
        )
        ProjectMember.objects.bulk_create(ProjectMember(project=p, group=group) for p in projects[: PROJECTS // 2])
        for index, conversation in enumerate(conversations):
            conversation.project = projects[index // PER_PROJECT]
        Conversation.objects.bulk_update(conversations, ["project"], batch_size=1000)
        # The reader was told of 200 scheduled turns' ends in the shared projects.
        shared = [c for c in conversations if c.project_id in {p.pk for p in projects[: PROJECTS // 2]}][:200]
        runs = Run.objects.bulk_create(
            Run(message=message, status=Run.Status.COMPLETED)
            for message in Message.objects.filter(conversation__in=shared, parent__isnull=True)[:200]
        )
        RunNotice.objects.bulk_create(RunNotice(run=run, user=reader) for run in runs)
        _analyze()
        with_projects = _pages(owner, project=projects[0])
        owner_marks = _marks_seconds(owner)
        reader_marks = _marks_seconds(reader)
        reader_chat = _timed(_client(reader), reverse("chat"))
        by_share = conversations[-1]
        Conversation.objects.filter(pk=by_share.pk).update(project=None)
        ConversationShare.objects.create(conversation=by_share, user=reader)
        read_by_share = _viewable_seconds(reader, by_share)
        read_by_project = _viewable_seconds(reader, shared[0])
    finally:
        users.filter(pk__in=[owner.pk, reader.pk]).delete()
        group.delete()

    print(
        f"projects: 1,000 conversations, none in a project (baseline) and in {PROJECTS} projects of "
        f"{PER_PROJECT} ({settings.DATABASES['default']['ENGINE']}):"
    )
    for label, (seconds, size, _) in with_projects.items():
        base = baseline.get(label)
        ratio = f"  ({seconds / base[0]:.2f}x the time, {size / base[1]:.2f}x the bytes)" if base else ""
        print(f"  {label:50} {seconds * 1000:7.2f} ms  {size / 1024:6.1f} KB{ratio}")
        if base:
            print(f"  {'  baseline':50} {base[0] * 1000:7.2f} ms  {base[1] / 1024:6.1f} KB")
    label = "a reader's chat page (10 shared projects)"
    print(f"  {label:50} {reader_chat[0] * 1000:7.2f} ms  {reader_chat[1] / 1024:6.1f} KB")
    print(
        f"  the read rule: through a share (baseline) {read_by_share * 1000:.2f} ms, through a project's group "
        f"{read_by_project * 1000:.2f} ms ({read_by_project / read_by_share:.2f}x)"
    )
    print(
        f"  the marks: owner {owner_marks * 1000:.2f} ms ({owner_marks / baseline_marks:.2f}x the baseline's "
        f"{baseline_marks * 1000:.2f} ms), a reader told of 200 turns {reader_marks * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main()
