"""The agents app's data migrations, run as `migrate` runs them, on rows as they were."""

from importlib import import_module

import pytest
from django.apps import apps

from agents.budgets import tokens_today
from agents.models import HttpTool, McpServer
from agents.secrets import secret_encrypt
from tests.factories import ConversationFactory, MessageFactory, RunFactory

pytestmark = pytest.mark.django_db


def test_the_upgrade_counts_what_runs_spent_before_the_ledger(user, other_user):
    """Today's budgets hold across the upgrade."""
    backfill = import_module("agents.migrations.0017_token_spend").spends_from_runs
    usage = {"agent_executions": [{"token_usage": {"total_tokens": 700}}, {"token_usage": None}]}
    for owner in (user, user, other_user):
        RunFactory(message=MessageFactory(conversation=ConversationFactory(owner=owner)), metrics=usage)
    RunFactory(message=MessageFactory(conversation=ConversationFactory(owner=other_user)))

    backfill(apps, None)

    assert (tokens_today(user_id=user.pk), tokens_today(user_id=other_user.pk)) == (1_400, 700)


def test_secrets_stored_before_they_were_bound_are_bound_where_their_source_goes_now():
    """0018: a stored secret keeps working where it went, and goes nowhere else."""
    tool = HttpTool.objects.create(
        name="tickets",
        description="Tickets",
        url_template="HTTPS://Tickets.Internal/api/{ticket_id}",
        parameters={"type": "object"},
        secret_encrypted=secret_encrypt("Bearer tok-123456"),
    )
    server = McpServer.objects.create(
        name="docs",
        description="Docs",
        transport="stdio",
        command="/usr/bin/docs-mcp",
        secret_encrypted=secret_encrypt("key-123456"),
    )
    unset = McpServer.objects.create(name="wiki", description="Wiki", url="http://wiki.internal/mcp")

    import_module("agents.migrations.0018_http_secret_origin").secrets_bind(apps, None)

    tool.refresh_from_db()
    server.refresh_from_db()
    unset.refresh_from_db()
    assert tool.secret_destination == "https://tickets.internal:443" and tool.secret_read() == "Bearer tok-123456"
    assert not server.secret_moved and server.secret_read() == "key-123456"
    assert unset.secret_destination == ""
    tool.url_template = "https://elsewhere.example/api/{ticket_id}"
    assert tool.secret_moved
