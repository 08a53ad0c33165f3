"""A project's own library documents: found and read inside the project (a
turn in one of its conversations, its readers' pages), never outside it."""

import pytest
from django.contrib.auth.models import Group

from agents.selectors import library_titles
from agents.tools.base import ToolContext
from agents.tools.search import web_search
from agents.tools.web import web_fetch
from library.models import LibraryDocument
from library.selectors import (
    ANY_PROJECT,
    library_document_get,
    library_document_removable,
    library_documents,
    library_list,
    library_search,
    library_url_id,
)
from library.services import library_document_create
from projects.models import ProjectMember
from tests.factories import ProjectFactory, ProjectMemberFactory, UserFactory

pytestmark = pytest.mark.django_db

PRICES_ZH = "空气源热泵的安装报价：主流机型约12万元。寒冷地区的供应商报价更高。"
QUOTES_EN = "Supplier quotes for the lab's heat pump: Nordtherm asks 1,350 EUR per unit installed."
WAL = "SQLite write-ahead logging lets readers continue while a writer appends to the WAL file."


@pytest.fixture
def projects():
    """Project 热泵市场 with a reader, a reader by group and a contributor who added
    two documents to it; another project with a document of its own; the team's
    library with one document; and an outsider."""
    project = ProjectFactory(name="热泵市场")
    contributor = ProjectMemberFactory(project=project, role=ProjectMember.Role.CONTRIBUTOR).user
    team = Group.objects.create(name="热泵组")
    in_group = UserFactory()
    in_group.groups.add(team)
    ProjectMemberFactory(project=project, group=team)
    other = ProjectFactory(name="Batteries")
    return {
        "project": project,
        "owner": project.owner,
        "contributor": contributor,
        "reader": ProjectMemberFactory(project=project).user,
        "in_group": in_group,
        "outsider": UserFactory(),
        "other": other,
        "prices": library_document_create(user=contributor, title="热泵报价", content=PRICES_ZH, project=project),
        "quotes": library_document_create(
            user=contributor, title="Supplier quotes", content=QUOTES_EN, project=project
        ),
        "elsewhere": library_document_create(
            user=other.owner, title="Battery supplier quotes", content="Supplier quotes for batteries.", project=other
        ),
        "team": library_document_create(user=contributor, title="SQLite WAL mode", content=WAL),
    }


def _titles(hits):
    return sorted(hit.title for hit in hits)


@pytest.mark.parametrize("query", ["热泵的报价", "12万元", "Nordtherm", "supplier quotes heat pump"])
@pytest.mark.parametrize("who", ["owner", "contributor", "reader", "in_group", "outsider"])
def test_outside_the_project_no_one_finds_its_documents_not_even_who_added_them(projects, who, query):
    hits = library_search(query=query, limit=10, user=projects[who])

    assert not {"热泵报价", "Supplier quotes"} & {hit.title for hit in hits}


@pytest.mark.parametrize(
    "query, title", [("热泵的报价", "热泵报价"), ("12万元", "热泵报价"), ("Nordtherm heat pump", "Supplier quotes")]
)
def test_inside_the_project_its_documents_are_found_in_chinese_and_english(projects, query, title):
    hits = library_search(query=query, limit=10, user=projects["owner"], project=projects["project"].pk)

    assert _titles(hits) == [title]


def test_inside_the_project_the_team_library_is_found_too_and_another_projects_is_not(projects):
    inside = projects["project"].pk

    assert _titles(library_search(query="WAL", limit=5, user=projects["owner"], project=inside)) == ["SQLite WAL mode"]
    assert "Battery supplier quotes" not in _titles(
        library_search(query="supplier quotes", limit=10, user=projects["owner"], project=inside)
    )
    assert _titles(
        library_search(query="supplier quotes", limit=10, user=projects["other"].owner, project=projects["other"].pk)
    ) == ["Battery supplier quotes"]


def test_a_document_of_the_project_is_read_on_its_page_by_the_projects_readers_alone(projects):
    prices = projects["prices"]

    for who in ("owner", "contributor", "reader", "in_group"):
        assert library_document_get(user=projects[who], document_id=prices.pk) == prices, who
    assert library_document_get(user=projects["outsider"], document_id=prices.pk) is None
    assert library_document_get(user=projects["other"].owner, document_id=prices.pk) is None


def test_someone_taken_out_of_the_project_reads_its_documents_no_more(projects):
    ProjectMember.objects.get(project=projects["project"], user=projects["reader"]).delete()
    projects["in_group"].groups.clear()

    for who in ("reader", "in_group"):
        assert library_document_get(user=projects[who], document_id=projects["prices"].pk) is None, who


def test_the_project_library_lists_only_the_projects_documents(projects):
    listed = library_list(user=projects["reader"], project=projects["project"])

    assert [item.document.title for item in listed] == ["Supplier quotes", "热泵报价"]


def test_the_project_library_searched_finds_only_the_projects_documents(projects):
    owner, project = projects["owner"], projects["project"]

    assert [item.document.title for item in library_list(user=owner, query="热泵的报价", project=project)] == [
        "热泵报价"
    ]
    # The team library is searched from inside the project's turns, but not listed on its page.
    assert library_list(user=owner, query="WAL", project=project) == []


def test_the_team_library_lists_no_projects_documents(projects):
    for who in ("owner", "contributor", "outsider"):
        listed = {item.document.title for item in library_list(user=projects[who])}
        assert listed == {"SQLite WAL mode"}, who
        searched = {item.document.title for item in library_list(user=projects[who], query="supplier quotes")}
        assert searched == set(), who


def test_documents_of_every_project_the_user_reads_and_of_none_else(projects):
    def titles(user):
        return sorted(library_documents(user=user, project=ANY_PROJECT).values_list("title", flat=True))

    assert titles(projects["reader"]) == ["SQLite WAL mode", "Supplier quotes", "热泵报价"]
    assert titles(projects["outsider"]) == ["SQLite WAL mode"]
    assert titles(projects["other"].owner) == ["Battery supplier quotes", "SQLite WAL mode"]


def test_the_projects_owner_may_remove_any_of_its_documents_a_reader_none(projects):
    prices = LibraryDocument.objects.select_related("project").get(pk=projects["prices"].pk)

    assert library_document_removable(user=projects["owner"], document=prices)
    assert library_document_removable(user=projects["contributor"], document=prices)
    assert not library_document_removable(user=projects["reader"], document=prices)


def test_a_new_conversations_examples_name_no_projects_document(projects):
    assert library_titles(language="zh-hans", user=projects["contributor"]).titles == ["SQLite WAL mode"]


def test_the_agents_tools_find_and_read_the_projects_documents_in_the_project_alone(projects):
    def context(project_id):
        return ToolContext(artifacts=None, user=projects["owner"], project_id=project_id)

    inside, outside = context(projects["project"].pk), context(None)
    url = projects["prices"].url

    assert web_search(outside, query="热泵的报价").metadata["results"] == 0
    found = web_search(inside, query="热泵的报价").output["sources"]
    assert [library_url_id(source["url"]) for source in found] == [projects["prices"].pk]
    refused = web_fetch(outside, url=url)
    assert not refused.success and "热泵报价" not in refused.content
    assert web_fetch(inside, url=url).output["source"]["title"] == "热泵报价"
    # Another project's turn finds nothing of this one's.
    assert not web_fetch(context(projects["other"].pk), url=url).success
