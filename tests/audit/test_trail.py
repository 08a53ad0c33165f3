"""What people do that the audit trail records, through the pages they do it
on: shares and revokes, continuing another's conversation, exports, and the
answers to a tool's request for permission."""

import pytest
from django.urls import reverse

from agents.services.execution import run_execute
from agents.state import pending_request
from audit.models import AuditEvent
from conversations import lifecycle
from conversations.models import ConversationShare
from tests.agents.test_engine import call
from tests.conversations.test_views import HTMX, _shared_conversation
from tests.model_server import Text

pytestmark = pytest.mark.django_db


def _actions(**filters):
    return list(
        AuditEvent.objects.filter(**filters)
        .exclude(action__in=("create", "change", "delete", "sign_in"))
        .order_by("at", "id")
        .values_list("action", "actor_name", "object_id", "detail")
    )


def test_a_share_a_fork_of_it_exports_and_the_revoke_are_recorded(client, user, other_user):
    conversation, message = _shared_conversation(user)
    client.force_login(user)
    client.post(
        reverse("share-create", args=[conversation.pk]), {"audience": "user", "username": other_user.username}, **HTMX
    )
    client.force_login(other_user)
    client.post(reverse("conversation-fork", args=[conversation.pk]), {"message": message.pk}, **HTMX)
    client.get(reverse("conversation-export-md", args=[conversation.pk]))
    client.get(reverse("artifact-export-docx", args=[conversation.pk, "report"]))
    client.force_login(user)
    client.get(reverse("conversation-export-zip", args=[conversation.pk]))
    share = ConversationShare.objects.get()
    client.post(reverse("share-delete", args=[conversation.pk]), {"share": share.pk}, **HTMX)
    # Forking one's own conversation is nobody else's business.
    client.post(reverse("conversation-fork", args=[conversation.pk]), {"message": message.pk}, **HTMX)

    actions = _actions()
    cid = str(conversation.pk)
    assert [(action, name) for action, name, *_ in actions] == [
        ("share", user.username),
        ("fork", other_user.username),
        ("export", other_user.username),
        ("export", other_user.username),
        ("export", user.username),
        ("share_revoke", user.username),
    ]
    assert actions[0][2:] == (cid, {"with": f"user {other_user.username}"})
    assert actions[1][2] == cid and actions[1][3]["owner"] == user.username
    assert actions[2][3]["as"] == "markdown" and actions[3][3] == {"as": "docx", "version": 1}
    assert actions[4][3]["as"] == "zip" and actions[5][3] == {"with": f"user {other_user.username}"}


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_the_answer_to_a_tools_request_is_recorded_with_the_tool(client, user, scripted_model, settings, decision):
    settings.TOOL_PERMISSIONS = {"create_artifact": "confirm"}
    scripted_model.add(Text(call("create_artifact", id="draft", content="草稿")))
    run = lifecycle.conversation_start(user=user, content="起草", enqueue=False).active_branch.runs.get()
    run_execute(run_id=run.pk)
    run.refresh_from_db()
    client.force_login(user)

    data = {"request_id": pending_request(run.checkpoint).id, "decision": decision}
    client.post(
        reverse("run-permission", args=[run.pk]), data, HTTP_X_FORWARDED_FOR="", REMOTE_ADDR="192.0.2.5", **HTMX
    )

    [(action, name, object_id, detail)] = _actions()
    assert (action, name, object_id) == (decision, user.username, str(run.pk))
    assert detail["tool"] == "create_artifact" and detail["decision"] == decision
    assert AuditEvent.objects.get(action=decision).address == "192.0.2.5"
