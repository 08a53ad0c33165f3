"""The path from the root to a message: one recursive query against walking
the parent links one query at a time."""

import time

from django.contrib.auth import get_user_model

from conversations.models import Conversation, Message
from conversations.tree import message_path

DEPTH = 300
REPEAT = 20


def _walk(message):
    path = [message]
    while path[-1].parent_id is not None:
        path.append(Message.objects.get(pk=path[-1].parent_id))
    return path[::-1]


def _best(fn, message):
    best = float("inf")
    for _ in range(REPEAT):
        started = time.perf_counter()
        fn(message)
        best = min(best, time.perf_counter() - started)
    return best


def main():
    user, _ = get_user_model().objects.get_or_create(username="bench")
    conversation = Conversation.objects.create(owner=user)
    leaf = None
    for i in range(DEPTH):
        leaf = Message.objects.create(conversation=conversation, parent=leaf, content=f"m{i}")
    assert [m.pk for m in message_path(message_id=leaf.pk)] == [m.pk for m in _walk(leaf)]

    walk, cte = _best(_walk, leaf), _best(lambda m: message_path(message_id=m.pk), leaf)
    print(f"path to root at depth {DEPTH} (best of {REPEAT}):")
    print(f"  parent walk, a query per level (baseline): {walk * 1000:7.2f} ms")
    print(f"  one recursive query:                      {cte * 1000:7.2f} ms")
    print(f"  ratio: {walk / cte:.1f}x faster")
