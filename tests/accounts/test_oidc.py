"""Single sign-on against a real OpenID provider process (tests.oidc_provider):
the portal's views through Django's test client, the provider through HTTP as
a browser would, so every token, key and signature is the provider's own."""

import time

import httpx
import jwt
import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse
from jwcrypto import jwk

from accounts.models import ProviderIdentity
from accounts.oidc import SignInRefused, SsoBackend
from tests.factories import ConversationShareFactory, UserFactory
from tests.oidc_provider.process import provider_running

PORTAL = "http://testserver"
USERS = {
    "ada": ("ada@example.com", "ada-secret-1"),
    "bob": ("bob@other.org", "bob-secret-1"),
    # Named like the admin's group of the groups tests.
    "reviewers": ("reviewers@example.com", "reviewers-secret-1"),
    "staffy": ("staffy@example.com", "staffy-secret-1"),
    # Their username claim is given in full-width letters by the test.
    "wide": ("wide@example.com", "wide-secret-1"),
}


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    with provider_running(
        data_dir=tmp_path_factory.mktemp("provider"),
        users=USERS,
        redirect_uris=[f"{PORTAL}/oidc/callback/"],
        post_logout_redirect_uris=[f"{PORTAL}/accounts/login/"],
    ) as running:
        yield running


@pytest.fixture
def sso(settings, provider):
    settings.OIDC_ISSUER = provider.issuer
    settings.SSO_ENABLED = True
    settings.OIDC_RP_CLIENT_ID = provider.client_id
    settings.OIDC_RP_CLIENT_SECRET = provider.client_secret
    settings.SSO_GROUPS_CLAIM = "groups"
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, "accounts.oidc.SsoBackend"]
    provider.groups_set({})
    provider.claims_set({})
    return provider


def provider_browser(provider, username: str) -> httpx.Client:
    """A browser signed in at the provider."""
    browser = httpx.Client(base_url=provider.url, follow_redirects=False, timeout=30)
    browser.get("/login/")
    signed_in = browser.post(
        "/login/",
        data={
            "username": username,
            "password": USERS[username][1],
            "csrfmiddlewaretoken": browser.cookies["provider_csrftoken"],
        },
    )
    assert signed_in.status_code == 302, signed_in.text
    return browser


def to_provider_and_back(client, browser) -> str:
    """Starts a sign-in at the portal and lets the provider answer: the callback URL it sends the browser to."""
    start = client.get(reverse("oidc_authentication_init"))
    assert start.status_code == 302
    assert start["Location"].startswith(browser.base_url.join("/o/authorize/").__str__())
    authorize = browser.get(start["Location"])
    assert authorize.status_code == 302, authorize.text
    callback = authorize.headers["location"]
    assert callback.startswith(f"{PORTAL}/oidc/callback/?")
    return callback.removeprefix(PORTAL)


def groups_of(username: str) -> set[str]:
    return set(User.objects.get(username=username).groups.values_list("name", flat=True))


def signed_in_through_provider(client, provider, username: str) -> None:
    client.post(reverse("logout"))
    response = client.get(to_provider_and_back(client, provider_browser(provider, username)))
    assert response.status_code == 302, response.content.decode()
    assert response["Location"] == reverse("chat")


@pytest.mark.django_db
def test_first_sign_in_creates_the_user_with_groups_and_the_next_updates_them(client, sso):
    sso.groups_set({"ada": ["research", "ops"]})
    browser = provider_browser(sso, "ada")

    response = client.get(to_provider_and_back(client, browser))
    assert response.status_code == 302
    assert response["Location"] == reverse("chat")
    user = User.objects.get(username="ada")
    assert int(client.session["_auth_user_id"]) == user.pk
    assert user.email == "ada@example.com"
    assert not user.has_usable_password()
    assert ProviderIdentity.objects.get(user=user).issuer == sso.issuer
    assert groups_of("ada") == {"research", "ops"}
    assert client.get(reverse("chat")).status_code == 200

    # The admin's own group is left alone; the provider's follow the provider.
    user.groups.add(Group.objects.create(name="reviewers"))
    sso.groups_set({"ada": ["research", "design"]})
    client.post(reverse("logout"))
    response = client.get(to_provider_and_back(client, browser))
    assert response.status_code == 302
    assert User.objects.filter(username__startswith="ada").count() == 1
    assert groups_of("ada") == {"research", "design", "reviewers"}


@pytest.mark.django_db
def test_groups_claim_never_takes_a_group_an_admin_made(client, sso):
    reviewers = Group.objects.create(name="reviewers")
    UserFactory(username="carol").groups.add(reviewers)
    shared = ConversationShareFactory(group=reviewers).conversation
    # bob signs in through the provider; the admin adds him to their group by hand.
    signed_in_through_provider(client, sso, "bob")
    User.objects.get(username="bob").groups.add(reviewers)

    # ada's claim names the admin's group: she neither joins it nor reads what is shared with it.
    sso.groups_set({"ada": ["reviewers", "research"]})
    signed_in_through_provider(client, sso, "ada")
    assert groups_of("ada") == {"research"}
    assert client.get(reverse("conversation-detail", args=[shared.pk])).status_code == 404

    # bob's next sign-in, his claim naming other groups, keeps the membership the admin gave him.
    sso.groups_set({"bob": ["research"]})
    signed_in_through_provider(client, sso, "bob")
    assert groups_of("bob") == {"reviewers", "research"}
    assert groups_of("carol") == {"reviewers"}

    # A person named like the group is not in it either.
    signed_in_through_provider(client, sso, "reviewers")
    assert groups_of("reviewers") == set()
    assert client.get(reverse("conversation-detail", args=[shared.pk])).status_code == 404


@pytest.mark.django_db
def test_a_full_width_username_signs_in_under_the_next_free_name(client, sso):
    signed_in_through_provider(client, sso, "staffy")
    # Django keeps usernames in NFKC: "ｓｔａｆｆｙ" is "staffy", whom it must not become.
    sso.claims_set({"wide": {"preferred_username": "ｓｔａｆｆｙ"}})
    signed_in_through_provider(client, sso, "wide")
    assert set(User.objects.values_list("username", flat=True)) == {"staffy", "staffy-2"}
    assert User.objects.get(username="staffy-2").email == "wide@example.com"
    assert client.get(reverse("chat")).status_code == 200

    # Signing in again finds the same person.
    signed_in_through_provider(client, sso, "wide")
    assert User.objects.count() == 2


@pytest.mark.django_db
def test_claims_the_database_cannot_keep_do_not_fail_a_sign_in(client, sso):
    """Postgres refuses NUL and lone surrogates, which a provider's JSON can carry."""
    sso.claims_set({"ada": {"preferred_username": "ada\x00\ud800", "given_name": "A\x00da", "family_name": "\ud800"}})
    sso.groups_set({"ada": ["ops\x00", "研究组"]})
    signed_in_through_provider(client, sso, "ada")
    assert User.objects.get(username="ada").first_name == ""
    assert groups_of("ada") == {"研究组"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("verified", "language", "said"),
    [
        ("false", "en", "has not verified your e-mail address"),
        ("False", "zh-hans", "身份提供方尚未验证你的电子邮件地址"),
        ("", "en", "has not verified your e-mail address"),
        ("yes", "en", "has not verified your e-mail address"),
        (0, "en", "has not verified your e-mail address"),
        (None, "en", "has not verified your e-mail address"),
    ],
)
def test_an_e_mail_the_provider_does_not_say_is_verified_is_refused_by_the_domain_allow_list(
    client, sso, settings, verified, language, said
):
    settings.SSO_ALLOWED_DOMAINS = ["example.com"]
    sso.claims_set({"ada": {"email_verified": verified}})
    callback = to_provider_and_back(client, provider_browser(sso, "ada"))
    response = client.get(callback, headers={"accept-language": language})
    assert response.status_code == 403
    assert said in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert not User.objects.filter(username="ada").exists()


@pytest.mark.django_db
def test_a_verified_e_mail_may_be_said_as_the_string_true(client, sso, settings):
    settings.SSO_ALLOWED_DOMAINS = ["example.com"]
    sso.claims_set({"ada": {"email_verified": "TRUE"}})
    signed_in_through_provider(client, sso, "ada")
    assert User.objects.filter(username="ada").exists()


@pytest.mark.django_db
def test_wrong_state_is_refused_with_a_page(client, sso):
    browser = provider_browser(sso, "ada")
    callback = to_provider_and_back(client, browser)
    code = callback.split("code=")[1].split("&")[0]

    response = client.get(reverse("oidc_authentication_callback"), {"code": code, "state": "not-the-state"})
    assert response.status_code == 403
    assert "This sign-in was not started here or was already used" in response.content.decode()
    assert "_auth_user_id" not in client.session

    # Used once: the same answer again is refused too.
    assert client.get(callback).status_code == 302
    client.post(reverse("logout"))
    response = client.get(callback, headers={"accept-language": "zh-hans"})
    assert response.status_code == 403
    assert "此次登录不是从这里发起的" in response.content.decode()
    assert "_auth_user_id" not in client.session


def _token_replaced(monkeypatch, replace):
    """The provider's real token response, its ID token put through `replace`."""
    original = SsoBackend.get_token

    def get_token(self, payload):
        tokens = original(self, payload)
        tokens["id_token"] = replace(tokens["id_token"])
        return tokens

    monkeypatch.setattr(SsoBackend, "get_token", get_token)


@pytest.mark.django_db
def test_tampered_id_token_is_refused_with_a_page(client, sso, monkeypatch):
    def tampered(token: str) -> str:
        head, body, signature = token.split(".")
        flipped = ("A" if signature[10] != "A" else "B").join((signature[:10], signature[11:]))
        return f"{head}.{body}.{flipped}"

    _token_replaced(monkeypatch, tampered)
    response = client.get(to_provider_and_back(client, provider_browser(sso, "ada")))
    assert response.status_code == 403
    assert "answer could not be verified" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert not User.objects.filter(username="ada").exists()


@pytest.mark.django_db
def test_expired_id_token_is_refused_with_a_page(client, sso, monkeypatch):
    """Signed with the provider's own key, so only its expiry is wrong."""
    browser = provider_browser(sso, "ada")
    callback = to_provider_and_back(client, browser)
    state = callback.split("state=")[1].split("&")[0]
    nonce = client.session["oidc_states"][state]["nonce"]

    def expired(token: str) -> str:
        claims = jwt.decode(token, options={"verify_signature": False})
        claims.update(iat=int(time.time()) - 7200, exp=int(time.time()) - 3600, nonce=nonce)
        kid = jwk.JWK.from_pem(sso.private_key_pem).thumbprint()
        return jwt.encode(claims, sso.private_key_pem, algorithm="RS256", headers={"kid": kid})

    _token_replaced(monkeypatch, expired)
    response = client.get(callback)
    assert response.status_code == 403
    assert "sign-in token has expired" in response.content.decode()
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_verify_refuses_a_real_token_with_a_flipped_signature_byte(client, sso):
    client.get(to_provider_and_back(client, provider_browser(sso, "ada")))
    token = client.session["oidc_id_token"]
    backend = SsoBackend()
    nonce = jwt.decode(token, options={"verify_signature": False})["nonce"]
    assert backend.verify_token(token, nonce=nonce)["sub"]

    head, body, signature = token.split(".")
    raw = bytearray(jwt.utils.base64url_decode(signature))
    raw[5] ^= 0x01
    with pytest.raises(SignInRefused) as refused:
        backend.verify_token(f"{head}.{body}.{jwt.utils.base64url_encode(bytes(raw)).decode()}", nonce=nonce)
    assert refused.value.reason == "token"
    with pytest.raises(SignInRefused):
        backend.verify_token(token, nonce="another-nonce")


@pytest.mark.django_db
def test_allow_list_refuses_with_a_page(client, sso, settings):
    settings.SSO_ALLOWED_DOMAINS = ["example.com"]
    settings.SSO_ALLOWED_GROUPS = ["research"]
    response = client.get(to_provider_and_back(client, provider_browser(sso, "bob")))
    assert response.status_code == 403
    assert "not allowed to use this portal" in response.content.decode()
    assert not User.objects.filter(username="bob").exists()

    # In a listed group, bob may.
    sso.groups_set({"bob": ["research"]})
    response = client.get(to_provider_and_back(client, provider_browser(sso, "bob")))
    assert response.status_code == 302
    assert User.objects.filter(username="bob").exists()


@pytest.mark.django_db
def test_sign_out_ends_the_provider_session_too(client, sso):
    browser = provider_browser(sso, "ada")
    client.get(to_provider_and_back(client, browser))
    id_token = client.session["oidc_id_token"]
    assert browser.get("/whoami/").text == "ada"

    response = client.post(reverse("logout"))
    assert response.status_code == 302
    assert "_auth_user_id" not in client.session
    end_session = httpx.URL(response["Location"])
    assert str(end_session.copy_with(query=None)) == f"{sso.issuer}/logout/"
    assert end_session.params["id_token_hint"] == id_token
    assert end_session.params["post_logout_redirect_uri"] == f"{PORTAL}/accounts/login/"

    back = browser.get(response["Location"])
    assert back.status_code == 302
    assert back.headers["location"] == f"{PORTAL}/accounts/login/"
    assert browser.get("/whoami/").text == ""


@pytest.mark.django_db
def test_unreachable_provider_is_a_page(client, sso, settings):
    settings.OIDC_ISSUER = "http://127.0.0.1:9/o"
    settings.OIDC_TIMEOUT = 2.0
    response = client.get(reverse("oidc_authentication_init"))
    assert response.status_code == 503
    assert "could not be reached" in response.content.decode()


@pytest.mark.django_db
def test_sso_is_off_without_an_issuer(client):
    assert client.get(reverse("oidc_authentication_init")).status_code == 404
    assert client.get(reverse("oidc_authentication_callback"), {"code": "x", "state": "y"}).status_code == 404
    assert "single sign-on" not in client.get(reverse("login")).content.decode()
