"""Adding a team from a CSV (accounts.onboarding and the users' admin), each
person's one-time set-password link, and a deactivated person signed out."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.sessions.models import Session
from django.core import mail
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from accounts import onboarding
from audit.models import AuditEvent
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

TEAM = "username,email,groups\n王芳,wang.fang@example.com,研究组;editors\nli.lei,,研究组\n"


def _read(text: str, *, create_groups=False) -> list:
    return onboarding.people_csv_read(data=text.encode(), create_groups=create_groups)


def test_every_wrong_row_says_why_and_nobody_is_added(db):
    UserFactory(username="taken")
    Group.objects.create(name="研究组")
    text = (
        "\ufeffUsername,Email,Groups\n"
        "ok.person,ok@example.com,研究组\n"
        "taken,,\n"
        "two,,\n"
        "two,,\n"
        "bad name!,,\n"
        "mail,not-an-address,\n"
        "nogroup,,没有这个组|研究组\n"
        ",,\n"
        ",x@example.com,\n"
    )

    rows = _read(text)

    errors = {row.line: " ".join(row.errors) for row in rows}
    assert errors[2] == ""
    assert "already called “taken”" in errors[3] and "“two” is in the file twice" in errors[5]
    assert "Enter a valid username" in errors[6] and "not an e-mail address" in errors[7]
    assert "No group is called “没有这个组”" in errors[8] and "The username is empty" in errors[10]
    assert [row.groups for row in rows if row.line == 8] == [["没有这个组", "研究组"]]
    with pytest.raises(ValueError):
        onboarding.people_add(rows=rows, create_groups=False)
    assert not get_user_model().objects.filter(username="ok.person").exists()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"name,email\nx,y\n", "must name the columns"),
        ("username\n王芳\n".encode("gb18030"), "not UTF-8"),
        (b"username\n" + b"x" * onboarding.MAX_BYTES, "larger than 1 MB"),
        ("username\n" + "".join(f"p{n}\n" for n in range(onboarding.MAX_ROWS + 1)), "more than 1000"),
    ],
)
def test_a_file_that_cannot_be_read_is_refused_with_the_reason(db, data, problem):
    with pytest.raises(onboarding.PeopleFileError, match=problem):
        onboarding.people_csv_read(data=data if isinstance(data, bytes) else data.encode(), create_groups=False)


def test_people_are_added_without_a_password_in_their_groups_made_when_asked(db):
    Group.objects.create(name="研究组")

    people = onboarding.people_add(rows=_read(TEAM, create_groups=True), create_groups=True)

    wang, li = people
    assert (wang.username, wang.email, li.email) == ("王芳", "wang.fang@example.com", "")
    assert not wang.has_usable_password() and not li.has_usable_password()
    assert sorted(wang.groups.values_list("name", flat=True)) == ["editors", "研究组"]
    assert list(li.groups.values_list("name", flat=True)) == ["研究组"]


@pytest.fixture
def adding(client):
    staff = UserFactory(username="管理员", is_staff=True, is_superuser=True)
    client.force_login(staff)
    Group.objects.create(name="研究组")
    return client


def _links(html: str) -> dict[str, str]:
    return dict(re.findall(r'<tr data-username="([^"]+)">.*?value="([^"]+)"', html, re.S))


def test_the_admin_adds_a_checked_file_on_confirmation_and_shows_each_persons_link(adding):
    url = reverse("admin:auth_user_people_add")
    upload = SimpleUploadedFile("team.csv", TEAM.encode("utf-8-sig"), content_type="text/csv")

    checked = adding.post(url, {"file": upload, "create_groups": "on"}).content.decode()
    assert checked.count("will be added") == 2 and not get_user_model().objects.filter(username="王芳").exists()
    csv_text = re.search(r'name="csv_text" value="([^"]*)"', checked).group(1)
    added = adding.post(url, {"csv_text": csv_text.replace("&#x27;", "'"), "create_groups": "on", "confirm": "1"})

    links = _links(added.content.decode())
    assert set(links) == {"王芳", "li.lei"} and "No mail server is configured" in added.content.decode()
    assert all(link.startswith("http://testserver/accounts/password/") for link in links.values())
    creates = AuditEvent.objects.filter(action="create", object_type="auth.user", object_repr__in=links)
    assert {record.actor_name for record in creates} == {"管理员"}


def test_a_file_with_a_wrong_row_is_shown_and_nobody_is_added(adding):
    text = TEAM + "li.lei,,\n"
    upload = SimpleUploadedFile("team.csv", text.encode(), content_type="text/csv")

    html = adding.post(reverse("admin:auth_user_people_add"), {"file": upload}).content.decode()

    assert "“li.lei” is in the file twice" in html and "No group is called “editors”" in html
    assert 'name="confirm"' not in html and "Nobody was added" in html
    assert get_user_model().objects.filter(username__in=["王芳", "li.lei"]).count() == 0


def test_a_link_sets_the_password_once_and_the_person_signs_in(adding, client):
    adding.post(
        reverse("admin:auth_user_people_add"),
        {"csv_text": "username\nnew.person\n", "confirm": "1"},
    )
    person = get_user_model().objects.get(username="new.person")
    [link] = _links(
        adding.post(
            reverse("admin:auth_user_changelist"), {"action": "password_links", "_selected_action": [person.pk]}
        ).content.decode()
    ).values()
    client.logout()

    form_page = client.get(link, follow=True)
    assert "For the account new.person." in form_page.content.decode()
    done = client.post(
        form_page.redirect_chain[-1][0],
        {"new_password1": "月光-quiet-42", "new_password2": "月光-quiet-42"},
        follow=True,
    )
    assert "Your password is set." in done.content.decode()
    signed_in = client.post(reverse("login"), {"username": "new.person", "password": "月光-quiet-42"})
    assert signed_in.status_code == 302 and signed_in["Location"] == "/"
    client.logout()
    assert "has been used already or has expired" in client.get(link, follow=True).content.decode()


def test_links_are_e_mailed_where_a_mail_server_is_configured(adding, settings):
    settings.EMAIL_HOST = "smtp.example.com"

    html = adding.post(
        reverse("admin:auth_user_people_add"), {"csv_text": TEAM, "create_groups": "on", "confirm": "1"}
    ).content.decode()

    [message] = mail.outbox
    assert message.to == ["wang.fang@example.com"] and _links(html)["王芳"] in message.body
    assert "(e-mailed)" in html and html.count("(e-mailed)") == 1


def test_staff_who_may_not_add_users_cannot_add_people(client):
    staff = UserFactory(is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_user"))
    client.force_login(staff)

    assert client.get(reverse("admin:auth_user_people_add")).status_code == 403
    assert client.post(reverse("admin:auth_user_people_add"), {"csv_text": TEAM, "confirm": "1"}).status_code == 403
    assert not get_user_model().objects.filter(username="王芳").exists()


def test_a_deactivated_person_is_signed_out_everywhere_at_once(
    client, user, other_user, django_capture_on_commit_callbacks
):
    client.force_login(user)
    other = type(client)()
    other.force_login(other_user)
    assert client.get(reverse("chat")).status_code == 200

    with django_capture_on_commit_callbacks(execute=True):
        user.is_active = False
        user.save()

    sessions = [session.get_decoded().get("_auth_user_id") for session in Session.objects.all()]
    assert sessions == [str(other_user.pk)]
    assert client.get(reverse("chat")).status_code == 302
    assert other.get(reverse("chat")).status_code == 200
