"""Adding a team: people from a CSV of username, e-mail and groups, each
with a one-time link to set their password (Django's password-reset tokens:
a link works until its password is set, or PASSWORD_RESET_TIMEOUT passes);
and a deactivated person's sessions ended.

The CSV is read whole before anything is added: every row is checked
(name, address, groups, duplicates here and in the portal) and nobody is
added while any row is wrong, so a file can be corrected and sent again.
"""

import csv
import io
import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.tokens import default_token_generator
from django.contrib.sessions.models import Session
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.utils.translation import gettext

logger = logging.getLogger(__name__)

# A team's file, not a directory's: larger files are refused before they are read.
MAX_BYTES = 1024 * 1024
MAX_ROWS = 1000
# Between a person's groups in the CSV's third column.
GROUP_SEPARATORS = (";", "|")


class PeopleFileError(Exception):
    """The file as a whole cannot be read (too large, not UTF-8, no header)."""


@dataclass
class PersonRow:
    line: int
    username: str
    email: str
    groups: list[str]
    errors: list[str] = field(default_factory=list)


@dataclass
class PersonAdded:
    user: object
    link: str
    emailed: bool = False


def people_csv_read(*, data: bytes, create_groups: bool) -> list[PersonRow]:
    """The file's people, each with what is wrong with its row (if anything).
    Its first row names the columns: username, email (optional) and groups
    (optional, separated by ; or |)."""
    if len(data) > MAX_BYTES:
        raise PeopleFileError(gettext("The file is larger than 1 MB: split it, or add fewer people at once."))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PeopleFileError(gettext("The file is not UTF-8 text. Save it as “CSV UTF-8” and try again.")) from None
    reader = csv.reader(io.StringIO(text))
    header = [name.strip().lower() for name in next(reader, [])]
    if "username" not in header:
        raise PeopleFileError(gettext("The first row must name the columns: username, email, groups."))
    column = {name: header.index(name) for name in ("username", "email", "groups") if name in header}
    rows = []
    for values in reader:
        if not any(value.strip() for value in values):
            continue
        if len(rows) >= MAX_ROWS:
            raise PeopleFileError(gettext("The file has more than %(count)s people.") % {"count": MAX_ROWS})

        def cell(name, values=values):
            index = column.get(name)
            return values[index].strip() if index is not None and index < len(values) else ""

        groups = cell("groups")
        for separator in GROUP_SEPARATORS[1:]:
            groups = groups.replace(separator, GROUP_SEPARATORS[0])
        rows.append(
            PersonRow(
                line=reader.line_num,
                username=cell("username"),
                email=cell("email"),
                groups=[name.strip() for name in groups.split(GROUP_SEPARATORS[0]) if name.strip()],
            )
        )
    _rows_check(rows, create_groups=create_groups)
    return rows


def _rows_check(rows: list[PersonRow], *, create_groups: bool) -> None:
    User = get_user_model()
    username_field = User._meta.get_field(User.USERNAME_FIELD)
    taken = set(
        User.objects.filter(**{f"{User.USERNAME_FIELD}__in": [row.username for row in rows]}).values_list(
            User.USERNAME_FIELD, flat=True
        )
    )
    groups = set(
        Group.objects.filter(name__in={name for row in rows for name in row.groups}).values_list("name", flat=True)
    )
    seen = set()
    for row in rows:
        try:
            username_field.run_validators(row.username)
            if not row.username:
                raise ValidationError(gettext("The username is empty."))
        except ValidationError as exc:
            row.errors += exc.messages
        if row.username in taken:
            row.errors.append(gettext("Someone here is already called “%(name)s”.") % {"name": row.username})
        if row.username in seen:
            row.errors.append(gettext("“%(name)s” is in the file twice.") % {"name": row.username})
        seen.add(row.username)
        if row.email:
            try:
                validate_email(row.email)
            except ValidationError:
                row.errors.append(gettext("“%(email)s” is not an e-mail address.") % {"email": row.email})
        unknown = [name for name in row.groups if name not in groups]
        if unknown and not create_groups:
            row.errors.append(
                gettext("No group is called %(names)s.") % {"names": ", ".join(f"“{n}”" for n in unknown)}
            )
        for name in row.groups:
            if len(name) > Group._meta.get_field("name").max_length:
                row.errors.append(gettext("The group name “%(name)s” is too long.") % {"name": name[:40]})


@transaction.atomic
def people_add(*, rows: list[PersonRow], create_groups: bool) -> list:
    """Adds the rows' people, all or none, without a usable password, in their
    groups (made where `create_groups` says)."""
    if any(row.errors for row in rows):
        raise ValueError("Rows with errors are not added.")
    User = get_user_model()
    groups = {group.name: group for group in Group.objects.filter(name__in={n for row in rows for n in row.groups})}
    people = []
    for row in rows:
        user = User(**{User.USERNAME_FIELD: row.username}, email=row.email)
        user.set_unusable_password()
        user.save()
        for name in row.groups:
            if name not in groups and create_groups:
                groups[name] = Group.objects.create(name=name)
        user.groups.add(*(groups[name] for name in row.groups))
        people.append(user)
    return people


def password_link(*, user, request) -> str:
    """The one-time address at which `user` sets their password."""
    path = reverse(
        "password-set",
        kwargs={
            "uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
            "token": default_token_generator.make_token(user),
        },
    )
    return request.build_absolute_uri(path)


def password_links_make(*, users, request) -> list[PersonAdded]:
    """A set-password link for each of `users`, e-mailed to those with an
    address where the portal has a mail server (EMAIL_HOST); the others', and
    any that could not be sent, are for the administrator to pass on."""
    added = []
    for user in users:
        link = password_link(user=user, request=request)
        emailed = False
        if settings.EMAIL_HOST and user.email:
            try:
                send_mail(
                    gettext("Your ArtifactFlow account"),
                    gettext(
                        "An account called %(name)s was made for you on ArtifactFlow. Choose your password here; "
                        "the link works once, for %(days)s days:\n\n%(link)s\n"
                    )
                    % {"name": user.get_username(), "link": link, "days": settings.PASSWORD_RESET_TIMEOUT // 86400},
                    None,
                    [user.email],
                )
                emailed = True
            except Exception:
                logger.warning("The set-password link for %s could not be e-mailed", user.get_username(), exc_info=True)
        added.append(PersonAdded(user=user, link=link, emailed=emailed))
    return added


def user_sessions_end(*, user_id: int) -> int:
    """Deletes the user's sessions (those not yet expired); returns how many.
    Sessions are not indexed by user: each is read, which a team's few
    thousand allow, and only a deactivation asks it."""
    ended = []
    for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator():
        if session.get_decoded().get("_auth_user_id") == str(user_id):
            ended.append(session.pk)
    Session.objects.filter(pk__in=ended).delete()
    return len(ended)
