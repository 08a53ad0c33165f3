import pytest

from artifacts.manager import ArtifactManager
from artifacts.tools import ARTIFACT_TOOLS, create_artifact, read_artifact, rewrite_artifact, update_artifact
from tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def manager():
    return ArtifactManager(session=ConversationFactory().artifact_session)


def test_create_answers_in_compact_xml_and_tells_the_page_what_changed(manager):
    result = create_artifact(manager, id="task_plan", content="- [ ] a", title="Plan")
    assert result.success
    assert result.content == '<artifact version="1"><id>task_plan</id>Created.</artifact>'
    assert result.metadata == {
        "artifact_change": {"artifact_id": "task_plan", "title": "Plan", "version": 1, "length": 7, "removed": 0, "added": 7}
    }


def test_an_edit_of_a_large_artifact_reports_its_size_not_its_text(manager):
    create_artifact(manager, id="report", content="x" * 200_000 + "\nend of draft\n")
    updated = update_artifact(manager, id="report", old_str="end of draft", new_str="end")
    rewritten = rewrite_artifact(manager, id="report", content="short")

    assert updated.metadata["artifact_change"] == {
        "artifact_id": "report", "title": "report", "version": 2, "length": 200_005, "removed": 12, "added": 3,
    }
    assert rewritten.metadata["artifact_change"] == {
        "artifact_id": "report", "title": "report", "version": 3, "length": 5, "removed": 200_005, "added": 5,
    }


def test_create_of_an_existing_id_is_an_error_the_model_can_act_on(manager):
    create_artifact(manager, id="task_plan", content="x")
    result = create_artifact(manager, id="task_plan", content="y")
    assert not result.success
    assert result.content.startswith('<error tool="create_artifact"><id>task_plan</id>')
    assert "update_artifact" in result.content


def test_update_reports_the_layer_that_matched(manager):
    create_artifact(manager, id="notes", content="He said “hello” to the team — twice.")
    exact = update_artifact(manager, id="notes", old_str="to the team", new_str="to everyone")
    normalized = update_artifact(manager, id="notes", old_str='said "hello"', new_str='said "hi"')

    assert exact.success and 'layer="exact"' in exact.content and 'version="2"' in exact.content
    assert normalized.success and 'layer="normalized"' in normalized.content
    assert 'said "hi" to everyone' in manager.read(artifact_id="notes")["content"]


def test_a_failed_update_says_why(manager):
    create_artifact(manager, id="notes", content="alpha\nalpha\n")
    result = update_artifact(manager, id="notes", old_str="alpha", new_str="beta")
    assert not result.success
    assert "<message>" in result.content and "2" in result.content


def test_rewrite_and_read_escape_the_content(manager):
    create_artifact(manager, id="page.html", content="old", content_type="text/html")
    rewrite_artifact(manager, id="page.html", content="<b>&</b>")
    result = read_artifact(manager, id="page.html")
    assert result.content == (
        '<artifact id="page.html" version="2" content_type="text/html" title="page.html">'
        "<content>&lt;b&gt;&amp;&lt;/b&gt;</content></artifact>"
    )


def test_every_tool_has_a_schema_naming_its_required_arguments():
    names = {tool.name for tool in ARTIFACT_TOOLS}
    assert names == {"create_artifact", "update_artifact", "rewrite_artifact", "read_artifact"}
    for tool in ARTIFACT_TOOLS:
        assert set(tool.parameters["required"]) <= set(tool.parameters["properties"])
        assert tool.permission == "auto"
