"""The OpenID Connect client: the provider's discovery document, and
mozilla-django-oidc's backend checking the ID token fully (signature,
issuer, audience, expiry, nonce) and mapping its claims (accounts.sso)."""

import logging
from urllib.parse import urlencode

import httpx
import jwt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.exceptions import SuspiciousOperation
from django.urls import reverse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from . import sso

logger = logging.getLogger(__name__)

# Read again after this long: a provider may move an endpoint or rotate its keys' URL.
DISCOVERY_SECONDS = 3600
# Seconds of clock difference between the provider and the portal that expiry allows.
CLOCK_LEEWAY = 60


class SignInRefused(Exception):
    """A sign-in the portal refuses; `reason` picks the page's explanation (accounts.views)."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def provider() -> dict:
    """The provider's discovery document (issuer/.well-known/openid-configuration),
    kept in the cache. A provider that does not answer, or names another
    issuer, refuses the sign-in rather than hanging it."""
    key = f"accounts.oidc.discovery:{settings.OIDC_ISSUER}"
    document = cache.get(key)
    if document is None:
        url = f"{settings.OIDC_ISSUER}/.well-known/openid-configuration"
        try:
            response = httpx.get(url, timeout=settings.OIDC_TIMEOUT)
            response.raise_for_status()
            document = response.json()
        except (httpx.HTTPError, ValueError) as error:
            raise SignInRefused("provider", f"discovery at {url} failed: {error}") from error
        if not isinstance(document, dict) or document.get("issuer", "").rstrip("/") != settings.OIDC_ISSUER:
            raise SignInRefused("provider", f"discovery at {url} names another issuer")
        cache.set(key, document, DISCOVERY_SECONDS)
    return document


def endpoint(name: str) -> str:
    url = provider().get(name)
    if not url:
        raise SignInRefused("provider", f"the discovery document has no {name}")
    return url


def logout_url(*, request, id_token: str) -> str | None:
    """Where sign-out sends the browser so the provider ends its session too
    (RP-initiated logout), then back to the sign-in page; None when the
    provider has no end_session_endpoint (or cannot be reached)."""
    try:
        end_session = provider().get("end_session_endpoint")
    except SignInRefused:
        logger.warning("Signed out of the portal only: the provider's discovery failed", exc_info=True)
        return None
    if not end_session:
        return None
    query = {
        "client_id": settings.OIDC_RP_CLIENT_ID,
        "post_logout_redirect_uri": request.build_absolute_uri(reverse(settings.LOGOUT_REDIRECT_URL)),
    }
    if id_token:
        query["id_token_hint"] = id_token
    return f"{end_session}{'&' if '?' in end_session else '?'}{urlencode(query)}"


class SsoBackend(OIDCAuthenticationBackend):
    """Signs in the user of a provider account (accounts.sso), creating them at
    their first sign-in; only from the callback view."""

    def __init__(self, *args, **kwargs):
        # Not the library's __init__, which reads the endpoints: Django makes a
        # backend for every password sign-in and every request's session, which
        # must not wait on the provider.
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None
        self.UserModel = get_user_model()

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self):  # the library's attribute, from discovery
        return endpoint("token_endpoint")

    @property
    def OIDC_OP_JWKS_ENDPOINT(self):
        return endpoint("jwks_uri")

    @property
    def OIDC_OP_USER_ENDPOINT(self):
        return provider().get("userinfo_endpoint")

    def authenticate(self, request, **kwargs):
        # A password form posted to a URL that carries ?code=&state= is no callback.
        if request is None or "code_verifier" not in kwargs:
            return None
        return super().authenticate(request, **kwargs)

    def _verify_jws(self, payload, key):
        """The library checks the signature and expiry; this also the issuer and
        the audience, and tells an expired token from a forged one."""
        try:
            algorithm = jwt.get_unverified_header(payload).get("alg")
            if algorithm != self.OIDC_RP_SIGN_ALGO:
                raise SignInRefused("token", f"signed with {algorithm!r}, not {self.OIDC_RP_SIGN_ALGO}")
            return jwt.decode(
                payload,
                key,
                algorithms=[algorithm],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=provider()["issuer"],
                leeway=CLOCK_LEEWAY,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError as error:
            raise SignInRefused("expired", str(error)) from error
        except jwt.InvalidTokenError as error:
            raise SignInRefused("token", str(error)) from error

    def verify_token(self, token, **kwargs):
        try:
            return super().verify_token(token, **kwargs)
        except SuspiciousOperation as error:
            # No key of the provider's matches, or the nonce differs.
            raise SignInRefused("token", str(error)) from error

    def get_userinfo(self, access_token, id_token, payload):
        """The ID token's claims, completed by the userinfo endpoint's when the
        provider has one (for the same subject)."""
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            userinfo = super().get_userinfo(access_token, id_token, payload)
            if userinfo.get("sub") != payload["sub"]:
                raise SignInRefused("token", "userinfo names another subject")
            claims.update(userinfo)
        return claims

    def verify_claims(self, claims):
        if not sso.subject_usable(subject=claims.get("sub")):
            raise SignInRefused("token", f"a subject the portal cannot keep: {claims.get('sub')!r}")
        groups = sso.claim_groups(claims=claims, claim=settings.SSO_GROUPS_CLAIM)
        refusal = sso.sign_in_refusal(
            claims=claims,
            groups=groups,
            domains=settings.SSO_ALLOWED_DOMAINS,
            allowed_groups=settings.SSO_ALLOWED_GROUPS,
        )
        if refusal:
            raise SignInRefused(refusal, f"subject {claims.get('sub')!r}")
        return True

    def filter_users_by_claims(self, claims):
        user = sso.identity_user(issuer=settings.OIDC_ISSUER, subject=claims["sub"])
        return [user] if user else []

    def create_user(self, claims):
        user = sso.identity_user_create(
            issuer=settings.OIDC_ISSUER, claims=claims, username_claim=settings.SSO_USERNAME_CLAIM
        )
        return self.update_user(user, claims)

    def update_user(self, user, claims):
        sso.user_profile_update(user=user, claims=claims)
        groups = sso.claim_groups(claims=claims, claim=settings.SSO_GROUPS_CLAIM)
        if groups is not None:
            sso.user_groups_sync(
                user=user, names=groups, create=settings.SSO_GROUPS_CREATE, prefix=settings.SSO_GROUPS_PREFIX
            )
        return user
