"""What an artifact's id, title and content type may be, checked wherever a
model, a user or an administrator names them (the tools, the admin), so that
no stored value can break a page, a URL or a response header."""

import re

from django.core.exceptions import ValidationError
from django.utils.translation import gettext

TITLE_MAX_CHARS = 300
CONTENT_TYPE_MAX_CHARS = 100
# Letters of any script, digits, "_", "-" and ".". Matched whole: with re.match
# a "$" lets "report\n" through, and no URL can then be made for it.
ARTIFACT_ID = re.compile(r"\w[\w\-.]{0,199}")
_TOKEN = r"[A-Za-z0-9!#$&^_.+\-]+"
# A media type and its parameters (RFC 9110), with no room for a line break.
_MEDIA_TYPE = re.compile(rf"{_TOKEN}/{_TOKEN}(?: ?; ?{_TOKEN}={_TOKEN})*")
# Tabs may stay; line breaks and other control characters may not.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def artifact_id_valid(value) -> bool:
    return isinstance(value, str) and ARTIFACT_ID.fullmatch(value) is not None


def artifact_id_validate(value) -> None:
    if not artifact_id_valid(value):
        raise ValidationError(
            gettext("An artifact id is 1-200 letters, digits, '_', '-' or '.', starting with a letter or digit.")
        )


def title_validate(value: str) -> None:
    if len(value) > TITLE_MAX_CHARS:
        raise ValidationError(
            gettext("A title is at most %(max)s characters; this one has %(length)s.")
            % {"max": TITLE_MAX_CHARS, "length": f"{len(value):,}"}
        )
    if _CONTROL.search(value):
        raise ValidationError(gettext("A title is one line of text, without line breaks or control characters."))


def content_type_validate(value: str) -> None:
    if len(value) > CONTENT_TYPE_MAX_CHARS or not _MEDIA_TYPE.fullmatch(value):
        raise ValidationError(
            gettext(
                "A content type is a media type of at most %(max)s characters, such as text/markdown or text/x-python."
            )
            % {"max": CONTENT_TYPE_MAX_CHARS}
        )
