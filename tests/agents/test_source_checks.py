"""A configured source's clean() runs the check its kind's tool code registered."""

import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError

from agents.models import HttpTool, McpServer
from agents.source_checks import source_problems


def test_an_http_tools_clean_reports_its_tool_codes_problems_by_field():
    tool = HttpTool(name="tickets", description="d", url_template="ftp://tickets.internal/{id}", parameters={})
    with pytest.raises(ValidationError) as raised:
        tool.clean()
    assert "http:// or https://" in " ".join(raised.value.message_dict["url_template"])


def test_an_mcp_servers_clean_reports_its_tool_codes_problems_by_field():
    server = McpServer(name="files", description="d", transport=McpServer.Transport.HTTP, url="not a url")
    with pytest.raises(ValidationError) as raised:
        server.clean()
    assert set(raised.value.message_dict) == {"url"}


def test_a_well_defined_http_tool_is_clean():
    HttpTool(
        name="tickets",
        description="d",
        url_template="https://tickets.internal/api/{ticket_id}",
        parameters={
            "type": "object",
            "properties": {"ticket_id": {"type": "string", "x-in": "path"}},
            "required": ["ticket_id"],
        },
    ).clean()


def test_a_source_kind_without_a_registered_check_is_refused_not_passed_unchecked():
    class Unchecked:
        pass

    with pytest.raises(ImproperlyConfigured, match="No check is registered for Unchecked"):
        source_problems(source=Unchecked())
