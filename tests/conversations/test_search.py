import importlib
from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from artifacts.models import Artifact
from conversations import search, selectors
from conversations.models import Conversation
from tests.factories import ConversationFactory, MessageFactory, UserFactory

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
migration = importlib.import_module("conversations.migrations.0004_search_cjk")


def _found(user, query, **kwargs) -> list[Conversation]:
    return search.conversation_search(user=user, query=query, **kwargs)


def _artifact(conversation, content, **kwargs) -> Artifact:
    return Artifact.objects.create(session_id=conversation.pk, artifact_id="report", content=content, **kwargs)


def _assert_index_matches_the_tables():
    """On SQLite, that each FTS5 table indexes exactly what its rows hold now."""
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        for table in ("conversations_message_fts", "artifacts_artifact_fts", "conversations_conversation_fts"):
            cursor.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")


def test_finds_titles_questions_answers_and_artifacts_of_my_conversations_only(user, other_user):
    by_title = ConversationFactory(owner=user, title="Postgres tuning")
    by_question = MessageFactory(conversation__owner=user, content="Is Postgres fast?").conversation
    by_answer = MessageFactory(
        conversation__owner=user, content="Which database?", response="Postgres, clearly."
    ).conversation
    by_artifact = ConversationFactory(owner=user, title="Report")
    _artifact(by_artifact, "# Findings\n\nPostgres wins the benchmark.")
    ConversationFactory(owner=user, title="Heat pumps")
    theirs = MessageFactory(conversation__owner=other_user, content="Postgres here too").conversation
    _artifact(ConversationFactory(owner=other_user), "Postgres in their artifact")

    found = _found(user, "postgres")

    assert set(found) == {by_title, by_question, by_answer, by_artifact}
    assert theirs not in found
    assert {c.pk for c in _found(other_user, "postgres")} == {
        theirs.pk,
        Artifact.objects.get(session__conversation__owner=other_user).session_id,
    }


def test_the_last_word_matches_as_a_prefix_and_every_word_must_match(user):
    both = MessageFactory(conversation__owner=user, content="Heat pumps and Postgres").conversation
    MessageFactory(conversation__owner=user, content="Postgres alone")

    assert _found(user, "postgr") != [] and _found(user, "Heat postg") == [both]
    assert _found(user, "pumps heat") == [both]  # stemmed, in any order


def test_results_are_newest_first_with_a_snippet_that_marks_the_match_and_escapes_the_rest(user):
    older = MessageFactory(
        conversation__owner=user, content="<script>alert(1)</script> Does Postgres & SQLite differ?"
    ).conversation
    newer = ConversationFactory(owner=user, title="Postgres <b>notes</b>")
    Conversation.objects.filter(pk=older.pk).update(updated_at=timezone.now() - timedelta(days=1))

    first, second = _found(user, "postgres")

    assert (first, second) == (newer, older)
    assert first.snippet.startswith("<mark>Postgres</mark> ") and "<b>" not in first.snippet
    assert "<mark>Postgres</mark>" in second.snippet and "&amp;" in second.snippet
    assert "<script>" not in second.snippet
    if connection.vendor == "sqlite":  # Postgres's ts_headline leaves tags out
        assert first.snippet == "<mark>Postgres</mark> &lt;b&gt;notes&lt;/b&gt;"
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in second.snippet


def test_the_snippet_comes_from_a_message_before_an_artifact_before_the_title(user):
    conversation = ConversationFactory(owner=user, title="Postgres title")
    _artifact(conversation, "An artifact about Postgres")
    assert "artifact" in _found(user, "postgres")[0].snippet
    MessageFactory(conversation=conversation, content="A question about Postgres")
    assert "question" in _found(user, "postgres")[0].snippet


HEAT_PUMP_QUESTION = "热泵在寒冷气候中的效率如何？"
HEAT_PUMP_ANSWER = "空气源热泵在零下十五度时效率下降。热泵的效率用COP衡量。"


@pytest.mark.parametrize("query", ["效率", "寒冷气候", "热泵的效率", "COP", "COP衡量", "衡量", "零下十五度", "效"])
def test_finds_chinese_words_of_any_length_inside_a_run_of_han_text(user, other_user, query):
    mine = MessageFactory(conversation__owner=user, content=HEAT_PUMP_QUESTION, response=HEAT_PUMP_ANSWER).conversation
    MessageFactory(conversation__owner=user, content="储能电池的寿命有多长？", response="大约十年。")
    MessageFactory(conversation__owner=other_user, content=HEAT_PUMP_QUESTION, response=HEAT_PUMP_ANSWER)

    assert _found(user, query) == [mine]


def test_a_chinese_word_is_its_characters_in_a_row_not_scattered(user):
    MessageFactory(conversation__owner=user, content="效果很好，比率不变。")
    together = MessageFactory(conversation__owner=user, content="热泵的效率").conversation

    assert _found(user, "效率") == [together]
    assert _found(user, "率效") == []


def test_chinese_titles_and_artifacts_are_found_with_english_words_beside_them(user):
    by_title = ConversationFactory(owner=user, title="分布式光伏的收益")
    by_artifact = ConversationFactory(owner=user, title="Report")
    _artifact(by_artifact, "# 热泵报告\n\n在寒冷气候中，heat pumps 的性能下降。")

    assert _found(user, "光伏") == [by_title]
    assert _found(user, "寒冷 pump") == [by_artifact]  # every word must match; English still stemmed
    assert _found(user, "寒冷 光伏") == []


def test_a_chinese_snippet_marks_the_whole_word_without_spaces_between_characters(user):
    MessageFactory(conversation__owner=user, content=HEAT_PUMP_QUESTION, response=HEAT_PUMP_ANSWER)

    (found,) = _found(user, "热泵的效率")
    (mixed,) = _found(user, "COP衡量")

    assert "<mark>热泵的效率</mark>" in found.snippet
    assert " " not in found.snippet.replace("<mark>", "").replace("</mark>", "")
    assert "<mark>COP衡量</mark>" in mixed.snippet


@pytest.mark.parametrize(("query", "marked"), [("寒冷气候中的效率", "寒冷气候中的效率"), ("efficiency", "efficiency")])
def test_a_match_deep_in_a_long_answer_is_marked_in_its_snippet(user, query, marked):
    # 11,000 characters in, past any snippet's reach from the start. (A Postgres
    # tsvector numbers 16,383 positions and keeps 256 of each character's.)
    answer = "前言很长，没有要找词。" * 1000 + "热泵在寒冷气候中的效率会下降, its efficiency drops." + "结尾。" * 1000
    MessageFactory(conversation__owner=user, content="请写一份长报告", response=answer)

    (found,) = _found(user, query)

    assert f"<mark>{marked}</mark>" in found.snippet
    assert len(found.snippet) < 200


def test_snippet_html_marks_only_whole_pairs_and_escapes_everything():
    assert search.snippet_html("a \x02<b>\x03 \x03c\x02") == "a <mark>&lt;b&gt;</mark> c"


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "*",
        "AND",
        "(",
        ")",
        "-",
        "NEAR",
        "NEAR(a b)",
        "OR",
        "NOT",
        ":",
        "^",
        "'",
        "\\",
        "{content}: x",
        'owner : "1"',
        "!!!",
        "...",
        "\x00",
        "post\x00gres",
        "a" * 5000,
        "word " * 2000,
        "_",
        "'; DROP TABLE x; --",
    ],
)
def test_hostile_queries_answer_without_error(client, user, query):
    MessageFactory(conversation__owner=user, content="Postgres AND NEAR words")
    client.force_login(user)

    response = client.get(reverse("conversation-search"), {"q": query}, **HTMX)

    assert response.status_code == 200
    assert response.status_code == client.get(reverse("chat"), {"q": query}).status_code


def test_punctuation_finds_nothing_and_an_operator_is_a_word(user):
    MessageFactory(conversation__owner=user, content="Postgres")
    with_near = MessageFactory(conversation__owner=user, content="Sit NEAR the fire").conversation

    assert _found(user, "*!?") == []
    assert _found(user, "NEAR") == _found(user, 'NEAR("fire"') == [with_near]


def test_another_users_rows_are_never_found_nor_counted(user, other_user):
    mine = MessageFactory(conversation__owner=user, conversation__title="Mine", content="Postgres").conversation
    for _ in range(3):
        MessageFactory(conversation__owner=other_user, content=f"Postgres {user.pk}")

    page = selectors.conversation_list(user=user, query="postgres", limit=1)

    assert page.items == [mine] and page.next_cursor == ""
    # Text that names the owner column or the user's id searches the text only.
    assert _found(other_user, f'owner : "{user.pk}"') == []
    assert _found(user, str(user.pk)) == []


def test_search_results_page_like_the_list(user):
    conversations = Conversation.objects.bulk_create(Conversation(owner=user, title=f"Postgres {i}") for i in range(60))
    # Half of them at the same moment: the id breaks the tie.
    Conversation.objects.filter(pk__in=[c.pk for c in conversations[:30]]).update(updated_at=timezone.now())

    first = selectors.conversation_list(user=user, query="postgres", limit=50)
    rest = selectors.conversation_list(user=user, query="postgres", before=first.next_cursor, limit=50)

    assert len(first.items) == 50 and len(rest.items) == 10 and rest.next_cursor == ""
    assert {c.pk for c in first.items + rest.items} == {c.pk for c in conversations}


def test_edits_renames_and_deletes_are_found_as_they_are_now(user):
    message = MessageFactory(conversation__owner=user, content="About Postgres")
    conversation = message.conversation
    artifact = _artifact(conversation, "notes")

    message.content = "About SQLite"
    message.save()
    assert _found(user, "postgres") == [] and _found(user, "sqlite") == [conversation]

    message.response = "Answered with Postgres"
    message.save(update_fields=["response"])
    conversation.title = "Renamed to zeppelins"
    conversation.save()
    artifact.content = "Findings on gardens"
    artifact.save()
    assert _found(user, "postgres") == _found(user, "zeppelin") == _found(user, "gardens") == [conversation]
    assert _found(user, "notes") == []

    artifact.delete()
    assert _found(user, "gardens") == []
    conversation.delete()
    assert _found(user, "postgres") == _found(user, "zeppelin") == []
    _assert_index_matches_the_tables()


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite keeps its index in sync with triggers")
def test_the_index_stays_whole_whichever_goes_first_a_conversation_or_its_rows(user):
    first = MessageFactory(conversation__owner=user, content="Postgres one").conversation
    _artifact(first, "Postgres artifact")
    second = MessageFactory(conversation__owner=user, content="Postgres two").conversation
    _artifact(second, "Postgres artifact")

    with connection.cursor() as cursor:
        # As a flush does, table by table: the conversation before its rows.
        cursor.execute("DELETE FROM conversations_conversation WHERE id = %s", [first.pk.hex])
        cursor.execute("DELETE FROM artifacts_artifact WHERE session_id = %s", [first.pk.hex])
        cursor.execute("DELETE FROM conversations_message WHERE conversation_id = %s", [first.pk.hex])
        cursor.execute("DELETE FROM artifacts_artifactsession WHERE conversation_id = %s", [first.pk.hex])
        # And as Django does: the rows before their conversation.
        cursor.execute("DELETE FROM artifacts_artifact WHERE session_id = %s", [second.pk.hex])
        cursor.execute("DELETE FROM conversations_message WHERE conversation_id = %s", [second.pk.hex])
        cursor.execute("DELETE FROM artifacts_artifactsession WHERE conversation_id = %s", [second.pk.hex])
        cursor.execute("DELETE FROM conversations_conversation WHERE id = %s", [second.pk.hex])

    _assert_index_matches_the_tables()
    assert _found(user, "postgres") == []


def test_a_conversation_given_to_another_user_is_found_by_its_new_owner_only(user, other_user):
    conversation = MessageFactory(conversation__owner=user, content="Postgres question").conversation
    _artifact(conversation, "Artifact on gardens")

    Conversation.objects.filter(pk=conversation.pk).update(owner=other_user)

    assert _found(user, "postgres") == _found(user, "gardens") == []
    assert _found(other_user, "postgres") == _found(other_user, "gardens") == [conversation]
    _assert_index_matches_the_tables()


@pytest.mark.django_db(transaction=True)
def test_the_migration_indexes_rows_saved_before_it():
    user = UserFactory()
    conversation = MessageFactory(conversation__owner=user, content="Saved before").conversation
    _artifact(conversation, "Artifact before")
    with connection.schema_editor() as editor:
        migration.search_index_drop(None, editor)
    ConversationFactory(owner=user, title="Titled before")

    with connection.schema_editor() as editor:
        migration.search_index_create(None, editor)

    assert _found(user, "saved") == _found(user, "artifact") == [conversation]
    assert [c.title for c in _found(user, "titled")] == ["Titled before"]


@pytest.mark.django_db(transaction=True)
def test_the_migration_reindexes_chinese_text_the_previous_index_held_as_one_word():
    user = UserFactory()
    with connection.schema_editor() as editor:
        migration.search_index_drop(None, editor)
        migration.previous.search_index_create(None, editor)
    conversation = MessageFactory(conversation__owner=user, content=HEAT_PUMP_QUESTION).conversation
    assert _found(user, "效率") == []

    with connection.schema_editor() as editor:
        migration.search_index_rebuild(None, editor)

    assert _found(user, "效率") == [conversation]
    _assert_index_matches_the_tables()


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite keeps its index in sync with triggers")
def test_every_search_trigger_is_in_place():
    """A later migration that rebuilds a table on SQLite drops its triggers
    with it: this fails until it recreates them."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%_fts_%'")
        triggers = {name for (name,) in cursor.fetchall()}
    expected = {statement.split()[-1] for statement in migration.SQLITE_DROP if "TRIGGER" in statement}
    assert expected <= triggers and len(expected) == 10
