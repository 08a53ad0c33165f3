"""Who a single sign-on is: the provider's claims mapped to a portal user,
their groups and whether they may sign in at all (docs/sso.md)."""

import logging

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db import transaction

from .models import ProviderGroup, ProviderIdentity, ProviderMembership

logger = logging.getLogger(__name__)

# Django's username and group name fields take at most this many characters.
USERNAME_MAX = 150
GROUP_NAME_MAX = 150
# The username of someone whose claims hold no character a username may have.
USERNAME_FALLBACK = "user"


def _storable(value) -> bool:
    """Whether this is text the database keeps: Postgres refuses NUL and lone
    surrogates (which JSON can carry), and a sign-in must not fail on them."""
    return isinstance(value, str) and "\x00" not in value and not any("\ud800" <= c <= "\udfff" for c in value)


def subject_usable(*, subject) -> bool:
    """Whether `sub` can be kept as a provider identity (at most 255 characters, as OpenID Connect has it)."""
    return _storable(subject) and 0 < len(subject) <= ProviderIdentity._meta.get_field("subject").max_length


def _username_clean(value: str) -> str:
    """`value` as Django keeps a username (NFKC: AbstractBaseUser.normalize_username),
    with only the characters its validator allows, at most USERNAME_MAX of them;
    empty when none is left. What is checked for being free is then what is saved."""
    normalize = get_user_model().normalize_username
    kept = "".join(c for c in normalize(value) if c.isalnum() or c in "@.+-_")
    # Dropping a character can bring two together that normalise into one (Hangul jamo).
    name = normalize(kept)[:USERNAME_MAX]
    try:
        UnicodeUsernameValidator()(name)
    except ValidationError:
        return ""
    return name


def claim_username(*, claims: dict, claim: str) -> str:
    """The username a new user gets: the configured claim, else the e-mail's
    local part, else the subject, as Django keeps usernames; else "user"."""
    email = claims.get("email") or ""
    for candidate in (claims.get(claim), email.partition("@")[0], claims.get("sub")):
        if isinstance(candidate, str) and (name := _username_clean(candidate)):
            return name
    return USERNAME_FALLBACK


def claim_groups(*, claims: dict, claim: str) -> set[str] | None:
    """The group names the claim lists; None when no claim is configured or the
    provider sent none (then the user's groups are left as they are)."""
    if not claim:
        return None
    value = claims.get(claim)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return None
    return {name.strip()[:150] for name in value if _storable(name) and name.strip()}


def email_verified(*, claims: dict) -> bool:
    """Whether the provider says it has verified the e-mail: `true`, or the
    string "true" in any case as some providers send it. Anything else,
    the string "false" and a missing claim too, is not a yes."""
    verified = claims.get("email_verified")
    return verified is True or (isinstance(verified, str) and verified.lower() == "true")


def sign_in_refusal(*, claims: dict, groups: set[str] | None, domains: list[str], allowed_groups: list[str]) -> str:
    """Why the allow-list keeps these claims out, or "" when it lets them in:
    an e-mail the provider has verified in a listed domain, or a listed group,
    lets one in. "unverified": the e-mail's domain is listed but the provider
    has not said the address is verified; "not_allowed" otherwise. An empty
    allow-list lets everyone in."""
    if not domains and not allowed_groups:
        return ""
    if groups and groups & set(allowed_groups):
        return ""
    email = claims.get("email")
    if isinstance(email, str) and "@" in email and email.rpartition("@")[2].lower() in domains:
        return "" if email_verified(claims=claims) else "unverified"
    return "not_allowed"


def _username_free(*, base: str) -> str:
    """`base` (as claim_username gives it), or `base-2`, `base-3`…: a local
    account of the same name is never taken over by a sign-in."""
    users = get_user_model().objects
    name, n = base, 1
    while users.filter(username__iexact=name).exists():
        n += 1
        suffix = f"-{n}"
        name = base[: USERNAME_MAX - len(suffix)] + suffix
    return name


def identity_user(*, issuer: str, subject: str):
    """The user this provider account signs in as, or None for a first sign-in."""
    identity = ProviderIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
    return identity.user if identity else None


@transaction.atomic
def identity_user_create(*, issuer: str, claims: dict, username_claim: str):
    """A new user for this provider account, with an unusable password: it
    signs in through the provider. Its e-mail and name come next (user_profile_update)."""
    username = _username_free(base=claim_username(claims=claims, claim=username_claim))
    user = get_user_model().objects.create_user(username)
    ProviderIdentity.objects.create(user=user, issuer=issuer, subject=claims["sub"])
    return user


def user_profile_update(*, user, claims: dict) -> None:
    """The name and e-mail as the provider has them now; a value the database
    cannot keep leaves the one before."""
    fields = {
        "email": claims.get("email"),
        "first_name": claims.get("given_name"),
        "last_name": claims.get("family_name"),
    }
    changed = [f for f, v in fields.items() if _storable(v) and getattr(user, f) != v[:150]]
    for field in changed:
        setattr(user, field, fields[field][:150])
    if changed:
        user.save(update_fields=changed)


def _claim_groups_mapped(*, names: set[str], create: bool, prefix: str) -> list[Group]:
    """The groups the provider fills for these claim values (ProviderGroup):
    mapped by an admin, or made by an earlier sign-in. With `create`, a value
    without one gets a new group named `prefix` + value; never a group that
    exists already, which an admin made and did not map."""
    mapped = {row.claim: row.group for row in ProviderGroup.objects.select_related("group").filter(claim__in=names)}
    if create:
        for value in sorted(names - mapped.keys()):
            group, made = Group.objects.get_or_create(name=(prefix + value)[:GROUP_NAME_MAX])
            if made:
                ProviderGroup.objects.create(group=group, claim=value)
            elif not ProviderGroup.objects.filter(group=group, claim=value).exists():
                # Unless another sign-in made it for this value a moment ago.
                logger.warning(
                    "The groups claim names %r; the group %r exists and is not mapped to it: not joined",
                    value,
                    group.name,
                )
                continue
            mapped[value] = group
    return list(mapped.values())


@transaction.atomic
def user_groups_sync(*, user, names: set[str], create: bool, prefix: str) -> None:
    """The user's provider-made memberships (ProviderMembership) are those the
    claim names now: added to the groups the claim values fill
    (_claim_groups_mapped), taken out of those it no longer names. A
    membership an admin made by hand is neither recorded nor removed, even in
    a group the provider fills and even when the claim names it too."""
    wanted = {group.pk for group in _claim_groups_mapped(names=names, create=create, prefix=prefix)}
    made = set(ProviderMembership.objects.filter(user=user).values_list("group_id", flat=True))
    if made - wanted:
        # Their records go with them (accounts.signals).
        user.groups.remove(*(made - wanted))
    joining = wanted - set(user.groups.values_list("pk", flat=True))
    if joining:
        user.groups.add(*joining)
        ProviderMembership.objects.bulk_create(
            [ProviderMembership(user=user, group_id=pk) for pk in joining], ignore_conflicts=True
        )
