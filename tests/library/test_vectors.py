"""The library's passages found by meaning too (library.vectors), with a
scripted embeddings server over HTTP (tests.embeddings_server): vectors made
incrementally and resumed after a failure, fused with full-text hits, kept to
what the person may read; with no model, full-text search alone."""

import io

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.db import connection
from django_q.models import OrmQ

from library import embeddings as embeddings_module
from library import vectors
from library.checks import embeddings_database_check
from library.models import LibraryPassage
from library.selectors import library_search, library_url_id, library_url_passage
from library.services import library_document_create
from library.vectors import vectors_index, vectors_nearest, vectors_query

pytestmark = pytest.mark.django_db
# Vectors are kept with sqlite-vec on the embedded default; on Postgres a model named changes nothing (tested below).
sqlite_only = pytest.mark.skipif("connection.vendor != 'sqlite'", reason="vectors are kept with sqlite-vec")
postgres_only = pytest.mark.skipif("connection.vendor != 'postgresql'", reason="the Postgres side of vectors being off")

FILLER_EN = "Residents were asked about comfort and noise at the end of each month. " * 12
FILLER_ZH = "每月月底询问住户对舒适度和噪声的感受。" * 14


def _report(user, *, site: str, chinese: bool = False):
    # The noise section second, its fact in none of the question's words: found by meaning or not at all.
    sections = (
        [("质保", f"{site}的压缩机质保期为七年。"), ("噪声", "一米处测得的噪声为四十二分贝。")]
        if chinese
        else [
            ("Warranty", f"The compressor warranty for {site} lasts 7 years."),
            ("Noise", "Measured one metre away, the noise was 42 decibels."),
        ]
    )
    filler = FILLER_ZH if chinese else FILLER_EN
    body = "\n\n".join(f"## {heading}\n\n{filler}\n\n{fact}\n\n{filler}" for heading, fact in sections)
    title = f"{site}热泵现场报告" if chinese else f"{site} heat pump field report"
    return library_document_create(user=user, title=title, content=f"# {title}\n\n{body}\n\n## Comfort\n\n{filler}")


def _place(hits, document, fact: str) -> int | None:
    """Where among the hits the passage holding `fact` is (1 for first), None when absent."""
    wanted = document.passages.get(text__contains=fact).number
    found = [(library_url_id(hit.url), library_url_passage(hit.url)) for hit in hits]
    return found.index((document.pk, wanted)) + 1 if (document.pk, wanted) in found else None


@sqlite_only
def test_a_question_in_other_words_finds_its_passage_once_there_are_vectors(user, embeddings):
    alder = _report(user, site="Alder 1003")
    linjiang = _report(user, site="临江1001", chinese=True)
    _report(user, site="Birch 1004")
    question, question_zh = "How loud is the unit at Alder 1003?", "临江1001机组的声音有多大？"
    before = library_search(query=question, limit=5), library_search(query=question_zh, limit=5)

    indexed = vectors_index()
    after = library_search(query=question, limit=5), library_search(query=question_zh, limit=5)

    assert indexed.embedded == LibraryPassage.objects.count() and indexed.left == 0
    # By its words alone the question finds the report, not the passage: "loud" is not "noise … decibels".
    assert _place(before[0], alder, "42 decibels") is None
    assert _place(before[1], linjiang, "四十二分贝") is None
    # Fused, it is among the hits: first by meaning, among the report's passages by its words.
    assert _place(after[0], alder, "42 decibels") is not None
    assert _place(after[1], linjiang, "四十二分贝") is not None
    assert {library_url_id(hit.url) for hit in after[0]} == {alder.pk}
    assert {library_url_id(hit.url) for hit in after[1]} == {linjiang.pk}


@sqlite_only
def test_vectors_follow_the_passages_a_batch_at_a_time_and_only_the_new_ones(user, embeddings, monkeypatch):
    monkeypatch.setattr(embeddings_module, "BATCH_MAX", 4)
    monkeypatch.setattr(vectors, "BATCH_MAX", 4)
    first, second = _report(user, site="Alder 1003"), _report(user, site="Birch 1004")
    count = LibraryPassage.objects.count()

    assert vectors_index().embedded == count
    assert all(len(texts) <= 4 for texts in embeddings.requests)
    asked = len(embeddings.requests)
    assert vectors_index().embedded == 0 and len(embeddings.requests) == asked

    first.content = first.content.replace("42 decibels", "45 decibels")
    first.save()
    again = vectors_index()

    assert again.embedded == first.passages.count() and again.removed == first.passages.count()
    assert sum(len(texts) for texts in embeddings.requests[asked:]) == first.passages.count()
    second.delete()
    assert vectors_index().removed == count - first.passages.count()


@sqlite_only
def test_indexing_stopped_by_the_service_goes_on_where_it_stopped(user, embeddings, monkeypatch):
    monkeypatch.setattr(vectors, "BATCH_MAX", 3)
    _report(user, site="Alder 1003")
    count = LibraryPassage.objects.count()
    embeddings.fail_after = 1

    stopped = vectors_index()
    embeddings.fail_after = None
    resumed = vectors_index()

    assert stopped.embedded == 3 and stopped.left == count - 3
    assert stopped.error.startswith("the embeddings service failed")
    assert resumed.embedded == count - 3 and resumed.left == 0
    assert embeddings.inputs == count


@sqlite_only
def test_a_library_that_does_not_cover_the_question_still_finds_nothing(user, embeddings):
    _report(user, site="Alder 1003")
    vectors_index()

    assert vectors_nearest(vector=vectors_query(query="write a cover letter for a job application"))
    assert library_search(query="write a cover letter for a job application", limit=5) == []


@sqlite_only
def test_vectors_never_bring_a_document_the_person_may_not_read(user, other_user, embeddings):
    team = Group.objects.create(name="热泵组")
    user.groups.add(team)
    hidden = _report(user, site="Alder 1003")
    hidden.group = team
    hidden.save()
    vectors_index()

    mine = library_search(query="How loud is the unit at Alder 1003?", limit=5, user=user)
    theirs = library_search(query="How loud is the unit at Alder 1003?", limit=5, user=other_user)

    assert mine and all(library_url_id(hit.url) == hidden.pk for hit in mine)
    assert theirs == []


@sqlite_only
def test_with_the_service_down_a_search_goes_on_by_its_words(user, embeddings):
    alder = _report(user, site="Alder 1003")
    vectors_index()
    embeddings.fail_after = 0

    hits = library_search(query="Alder 1003 decibels", limit=5)

    assert hits and library_url_id(hits[0].url) == alder.pk


def test_with_no_embeddings_model_search_is_full_text_alone(user, settings):
    settings.EMBEDDINGS = {**settings.EMBEDDINGS, "model": ""}
    alder = _report(user, site="Alder 1003")

    assert vectors_index().embedded == 0
    assert vectors_query(query="How loud is the unit at Alder 1003?") is None
    assert library_url_id(library_search(query="Alder 1003 decibels", limit=5)[0].url) == alder.pk


@postgres_only
def test_on_postgres_a_configured_model_leaves_search_to_its_words(user, embeddings):
    _report(user, site="Alder 1003")

    assert vectors_index().embedded == 0 and embeddings.requests == []
    assert library_search(query="Alder 1003 decibels", limit=5)
    assert embeddings.requests == []


@sqlite_only
def test_a_saved_document_queues_one_indexing_task_for_many_saves(user, embeddings, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        for site in ("Alder 1003", "Birch 1004", "Cedar 1005"):
            _report(user, site=site)

    assert OrmQ.objects.count() == 1
    vectors.vectors_index_task()
    assert embeddings.inputs == LibraryPassage.objects.count()
    # A run stopped by its time queues the next (the save's own task is queued only when its transaction commits).
    _report(user, site="Elm 1006")
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(vectors, "INDEX_SECONDS", 0)
            patch.setattr(vectors, "BATCH_MAX", 1)
            vectors.vectors_index_task()
    assert OrmQ.objects.count() == 2


def test_a_postgres_portal_with_a_model_named_is_warned(settings):
    settings.EMBEDDINGS = {**settings.EMBEDDINGS, "model": "text-embedding-3-small"}

    warnings = embeddings_database_check(None)

    assert [warning.id for warning in warnings] == ([] if connection.vendor == "sqlite" else ["library.W001"])


@sqlite_only
def test_library_reindex_gives_every_passage_its_vector_and_goes_on_after_a_failure(user, embeddings, monkeypatch):
    monkeypatch.setattr(vectors, "BATCH_MAX", 2)
    _report(user, site="Alder 1003")
    embeddings.fail_after = 1
    out = io.StringIO()

    with pytest.raises(CommandError, match="2 passages were given vectors; run it again"):
        call_command("library_reindex", stdout=out)
    embeddings.fail_after = None
    call_command("library_reindex", stdout=out)

    # Cut again, the document's passages are new ones: all of them are embedded afresh.
    assert out.getvalue().splitlines()[-1] == f"Gave {LibraryPassage.objects.count()} passages their vectors."
    assert vectors_index().embedded == 0
