import importlib

import pytest
from django.apps import apps
from django.contrib.auth.models import Group, User

from accounts import sso
from accounts.models import ProviderGroup, ProviderIdentity, ProviderMembership

ISSUER = "https://id.example.com/realms/team"


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        ({"preferred_username": "ada", "email": "lovelace@example.com", "sub": "1"}, "ada"),
        ({"email": "lovelace@example.com", "sub": "1"}, "lovelace"),
        ({"sub": "0b5e-11"}, "0b5e-11"),
        # Characters a username may not hold are dropped; a claim left empty falls through.
        ({"preferred_username": "Ada L/o", "sub": "1"}, "AdaLo"),
        ({"preferred_username": " / ", "email": "x@example.com", "sub": "1"}, "x"),
        ({"preferred_username": "ada\u200b\u202e", "sub": "1"}, "ada"),
        # Chinese names are letters, which Django's usernames allow.
        ({"preferred_username": "张伟", "sub": "1"}, "张伟"),
        # As Django keeps usernames (NFKC): full-width letters are the ASCII ones.
        ({"preferred_username": "ｓｔａｆｆｙ", "sub": "1"}, "staffy"),
        ({"preferred_username": "ａｄａ　ｌ", "sub": "1"}, "adal"),
        ({"preferred_username": "x½", "sub": "1"}, "x12"),
        # Nothing a username may hold anywhere: a name still, never a failed sign-in.
        ({"preferred_username": "🙂", "email": "!!@example.com", "sub": "|"}, "user"),
        ({"sub": ""}, "user"),
        # At most 150 characters, counted after normalising (one "ﷺ" is 18).
        ({"preferred_username": "a" * 200, "sub": "1"}, "a" * 150),
        ({"preferred_username": "ﷺ" * 10, "sub": "1"}, ("صلىاللهعليهوسلم" * 10)[:150]),
    ],
)
def test_claim_username(claims, expected):
    assert sso.claim_username(claims=claims, claim="preferred_username") == expected


def test_claim_username_from_another_claim():
    claims = {"preferred_username": "ada", "upn": "ada.lovelace@corp.example", "sub": "1"}
    assert sso.claim_username(claims=claims, claim="upn") == "ada.lovelace@corp.example"


@pytest.mark.parametrize(
    ("claims", "claim", "expected"),
    [
        ({"groups": ["research", " ops ", ""]}, "groups", {"research", "ops"}),
        ({"groups": "research"}, "groups", {"research"}),
        ({"groups": []}, "groups", set()),
        # No claim sent, or none configured: the user's groups are left alone.
        ({}, "groups", None),
        ({"groups": ["research"]}, "", None),
        ({"groups": {"a": 1}}, "groups", None),
        # Names the database cannot keep (Postgres refuses NUL and lone surrogates) are left out.
        ({"groups": ["ops\x00", "\ud800", "研究组"]}, "groups", {"研究组"}),
    ],
)
def test_claim_groups(claims, claim, expected):
    assert sso.claim_groups(claims=claims, claim=claim) == expected


@pytest.mark.parametrize(
    ("claims", "groups", "refusal"),
    [
        ({"email": "ada@Example.com", "email_verified": True}, None, ""),
        ({"email": "ada@other.org", "email_verified": True}, None, "not_allowed"),
        # An address the provider has not verified proves nothing about its domain: only a
        # real true, or the string "true" as some providers send it, is a yes.
        ({"email": "ada@example.com", "email_verified": False}, None, "unverified"),
        ({"email": "ada@example.com", "email_verified": "false"}, None, "unverified"),
        ({"email": "ada@example.com", "email_verified": "FALSE"}, None, "unverified"),
        ({"email": "ada@example.com", "email_verified": 1}, None, "unverified"),
        ({"email": "ada@example.com", "email_verified": [True]}, None, "unverified"),
        ({"email": "ada@example.com"}, None, "unverified"),
        ({"email": "ada@example.com", "email_verified": "True"}, None, ""),
        ({"email": "ada@example.com", "email_verified": "true"}, None, ""),
        ({"email": "ada@other.org"}, {"research"}, ""),
        ({"email": "ada@example.com", "email_verified": "false"}, {"research"}, ""),
        ({"email": "ada@other.org"}, {"sales"}, "not_allowed"),
        ({}, set(), "not_allowed"),
        # A domain is matched whole: a look-alike is no match.
        ({"email": "ada@evilexample.com", "email_verified": True}, None, "not_allowed"),
    ],
)
def test_sign_in_refusal(claims, groups, refusal):
    assert (
        sso.sign_in_refusal(claims=claims, groups=groups, domains=["example.com"], allowed_groups=["research"])
        == refusal
    )


def test_sign_in_refusal_without_allow_list():
    assert sso.sign_in_refusal(claims={}, groups=None, domains=[], allowed_groups=[]) == ""


@pytest.mark.django_db
def test_first_sign_in_creates_user_and_never_takes_a_local_account():
    local = User.objects.create_user("ada", password="x")
    claims = {"sub": "s-1", "preferred_username": "ada", "email": "ada@example.com"}
    user = sso.identity_user_create(issuer=ISSUER, claims=claims, username_claim="preferred_username")
    assert user != local
    assert user.username == "ada-2"
    assert not user.has_usable_password()
    assert sso.identity_user(issuer=ISSUER, subject="s-1") == user
    # The same subject at another issuer is another person.
    assert sso.identity_user(issuer="https://other.example.com", subject="s-1") is None
    assert ProviderIdentity.objects.get(user=user).subject == "s-1"


@pytest.mark.django_db
def test_profile_update_follows_the_provider():
    user = User.objects.create_user("ada", email="old@example.com")
    sso.user_profile_update(user=user, claims={"email": "new@example.com", "given_name": "Ada", "family_name": "L"})
    user.refresh_from_db()
    assert (user.email, user.first_name, user.last_name) == ("new@example.com", "Ada", "L")

    # A value the database cannot keep leaves the one before.
    sso.user_profile_update(
        user=user, claims={"email": "x\x00@example.com", "given_name": "\ud800", "family_name": "李"}
    )
    user.refresh_from_db()
    assert (user.email, user.first_name, user.last_name) == ("new@example.com", "Ada", "李")


@pytest.mark.parametrize(
    ("subject", "usable"),
    [
        ("0b5e-11", True),
        ("a" * 255, True),
        ("a" * 256, False),
        ("", False),
        ("a\x00", False),
        ("\udfff", False),
        (7, False),
    ],
)
def test_subject_usable(subject, usable):
    assert sso.subject_usable(subject=subject) is usable


@pytest.mark.django_db
def test_first_sign_in_after_a_full_width_name_gets_the_next_free_one():
    User.objects.create_user("staffy")
    claims = {"sub": "s-2", "preferred_username": "ｓｔａｆｆｙ"}
    user = sso.identity_user_create(issuer=ISSUER, claims=claims, username_claim="preferred_username")
    assert user.username == "staffy-2"
    another = sso.identity_user_create(
        issuer=ISSUER, claims={"sub": "s-3", "preferred_username": "ＳＴＡＦＦＹ"}, username_claim="preferred_username"
    )
    assert another.username == "STAFFY-3"


@pytest.mark.django_db
def test_a_long_name_taken_keeps_its_suffix_within_150_characters():
    User.objects.create_user("a" * 150)
    user = sso.identity_user_create(
        issuer=ISSUER, claims={"sub": "s-1", "preferred_username": "a" * 200}, username_claim="preferred_username"
    )
    assert user.username == "a" * 148 + "-2"
    user.full_clean()


def memberships(user) -> dict[str, bool]:
    """The user's groups, each with whether a sign-in made the membership."""
    made = set(ProviderMembership.objects.filter(user=user).values_list("group__name", flat=True))
    return {name: name in made for name in user.groups.values_list("name", flat=True)}


@pytest.mark.django_db
def test_groups_sync_fills_the_groups_it_makes_and_never_an_admins():
    user = User.objects.create_user("ada")
    reviewers = Group.objects.create(name="reviewers")
    user.groups.add(reviewers)
    staff = Group.objects.create(name="staff")

    sso.user_groups_sync(user=user, names={"research", "ops", "staff"}, create=True, prefix="")
    # "staff" is the admin's: named by the claim, not joined, not taken.
    assert memberships(user) == {"reviewers": False, "research": True, "ops": True}
    assert dict(ProviderGroup.objects.values_list("claim", "group__name")) == {"research": "research", "ops": "ops"}
    assert not staff.user_set.exists()

    sso.user_groups_sync(user=user, names={"research"}, create=True, prefix="")
    # Taken out of "ops", which the provider no longer names; the admin's group stays.
    assert memberships(user) == {"reviewers": False, "research": True}

    sso.user_groups_sync(user=user, names=set(), create=True, prefix="")
    assert memberships(user) == {"reviewers": False}


@pytest.mark.django_db
def test_groups_sync_names_the_groups_it_makes_with_the_prefix():
    user = User.objects.create_user("ada")
    Group.objects.create(name="research")
    sso.user_groups_sync(user=user, names={"research", "研究组"}, create=True, prefix="sso-")
    assert memberships(user) == {"sso-research": True, "sso-研究组": True}
    assert dict(ProviderGroup.objects.values_list("claim", "group__name")) == {
        "research": "sso-research",
        "研究组": "sso-研究组",
    }
    # An admin's group named with the prefix is not the provider's either.
    Group.objects.create(name="sso-ops")
    sso.user_groups_sync(user=user, names={"ops"}, create=True, prefix="sso-")
    assert memberships(user) == {}


@pytest.mark.django_db
def test_groups_sync_fills_an_admins_group_the_admin_mapped():
    ada, bob = User.objects.create_user("ada"), User.objects.create_user("bob")
    research = Group.objects.create(name="Research")
    ProviderGroup.objects.create(claim="research-team", group=research)
    # The admin added bob by hand before the provider named him: it stays the admin's.
    bob.groups.add(research)

    for user in (ada, bob):
        sso.user_groups_sync(user=user, names={"research-team"}, create=False, prefix="")
    assert memberships(ada) == {"Research": True}
    assert memberships(bob) == {"Research": False}

    for user in (ada, bob):
        sso.user_groups_sync(user=user, names=set(), create=False, prefix="")
    assert memberships(ada) == {}
    assert memberships(bob) == {"Research": False}


@pytest.mark.django_db
def test_groups_sync_without_creating_joins_mapped_groups_only():
    user = User.objects.create_user("ada")
    Group.objects.create(name="research")
    sso.user_groups_sync(user=user, names={"research", "unknown"}, create=False, prefix="")
    assert memberships(user) == {}
    assert not Group.objects.filter(name="unknown").exists()


@pytest.mark.django_db
def test_a_membership_the_admin_ends_and_makes_again_is_the_admins():
    user = User.objects.create_user("ada")
    sso.user_groups_sync(user=user, names={"research"}, create=True, prefix="")
    research = Group.objects.get(name="research")

    user.groups.remove(research)
    user.groups.add(research)
    sso.user_groups_sync(user=user, names=set(), create=True, prefix="")
    assert memberships(user) == {"research": False}

    # From the group's side, and by clearing, alike.
    sso.user_groups_sync(user=User.objects.create_user("bob"), names={"research"}, create=True, prefix="")
    research.user_set.clear()
    assert not ProviderMembership.objects.exists()


@pytest.mark.django_db
def test_a_deleted_provider_membership_leaves_the_person_in_the_group_as_the_admins():
    user = User.objects.create_user("ada")
    sso.user_groups_sync(user=user, names={"research"}, create=True, prefix="")
    ProviderMembership.objects.filter(user=user).delete()
    sso.user_groups_sync(user=user, names=set(), create=True, prefix="")
    assert memberships(user) == {"research": False}


@pytest.mark.django_db
def test_the_migration_keeps_the_groups_the_provider_filled_and_its_memberships():
    """As 0003 left them: provider groups marked without a claim value, and no
    record of who put whom in them."""
    migration = importlib.import_module("accounts.migrations.0004_sso_memberships")
    research, reviewers = Group.objects.create(name="research"), Group.objects.create(name="reviewers")
    ProviderGroup.objects.create(group=research, claim="")
    sso_user, local = User.objects.create_user("ada"), User.objects.create_user("carol")
    ProviderIdentity.objects.create(user=sso_user, issuer=ISSUER, subject="s-1")
    for user in (sso_user, local):
        user.groups.add(research, reviewers)

    migration.provider_groups_keep_their_claim(apps, None)
    migration.provider_memberships_record(apps, None)

    assert dict(ProviderGroup.objects.values_list("claim", "group__name")) == {"research": "research"}
    assert memberships(sso_user) == {"research": True, "reviewers": False}
    assert memberships(local) == {"research": False, "reviewers": False}
    # Which the next sign-in ends as before: the claim no longer names it.
    sso.user_groups_sync(user=sso_user, names=set(), create=True, prefix="")
    assert memberships(sso_user) == {"reviewers": False}
