"""Ids as they arrive in URLs and forms, checked before they reach a query.

A number the database cannot hold ("9" * 25 overflows SQLite and Postgres
bigints), a non-ASCII digit ("²".isdigit() is true, int("²") fails) or a NUL
byte (Postgres refuses it in text) would otherwise be a 500 where a missing
object is a 404.
"""

import re

from django.urls import register_converter

# The largest value of a bigint primary key, on SQLite and Postgres alike.
ID_MAX = 2**63 - 1
_ID = re.compile(r"[0-9]{1,19}")


def id_from_text(value) -> int | None:
    """The id `value` names, or None when it cannot name a row."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        return None
    number = int(value)
    return number if number <= ID_MAX else None


class IdConverter:
    """`<id:run_id>`: a row id; anything else is no match, so a 404."""

    regex = _ID.pattern

    def to_python(self, value: str) -> int:
        number = id_from_text(value)
        if number is None:
            raise ValueError(value)
        return number

    def to_url(self, value) -> str:
        return str(value)


class ArtifactIdConverter:
    """`<artifact:artifact_id>`: the characters every artifact id is made of
    (agents' ids and uploads' alike, see artifacts.validators.ARTIFACT_ID)."""

    regex = r"[\w.\-]{1,200}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(IdConverter, "id")
register_converter(ArtifactIdConverter, "artifact")
