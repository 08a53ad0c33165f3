"""Single sign-on in Chromium against a real OpenID provider process
(tests.oidc_provider): a portal of this module's own configured for it."""

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import portal_running
from tests.e2e.test_accessibility import _violations
from tests.oidc_provider.process import provider_running

pytestmark = pytest.mark.e2e

USERS = {"grace": ("grace@example.com", "grace-secret-1")}
LABEL = "Sign in with Test ID"


@pytest.fixture(scope="module")
def provider(tmp_path_factory):
    # Loopback redirect URIs match whatever port the portal gets (RFC 8252).
    with provider_running(
        data_dir=tmp_path_factory.mktemp("provider"),
        users=USERS,
        redirect_uris=["http://127.0.0.1/oidc/callback/"],
        post_logout_redirect_uris=["http://127.0.0.1/accounts/login/"],
    ) as running:
        yield running


@pytest.fixture(scope="module")
def portal(portal_template, tmp_path_factory, provider):
    with portal_running(
        template=portal_template,
        data_dir=tmp_path_factory.mktemp("portal-sso"),
        extra_env={
            "ARTIFACTFLOW_OIDC_ISSUER": provider.issuer,
            "ARTIFACTFLOW_OIDC_CLIENT_ID": provider.client_id,
            "ARTIFACTFLOW_OIDC_CLIENT_SECRET": provider.client_secret,
            "ARTIFACTFLOW_OIDC_GROUPS_CLAIM": "groups",
            "ARTIFACTFLOW_OIDC_BUTTON_LABEL": LABEL,
            "ARTIFACTFLOW_LOCAL_PASSWORDS": "staff",
        },
    ) as running:
        yield running


def _watched(page):
    """Records what the Content-Security-Policy refuses."""
    page.csp_violations = []
    page.on(
        "console",
        lambda message: page.csp_violations.append(message.text) if "Content Security Policy" in message.text else None,
    )
    return page


def _sign_in_through_provider(page, *, portal, provider, username):
    page.goto(f"{portal.base_url}/accounts/login/")
    # Passwords are for staff only: the page offers the provider's button alone.
    expect(page.get_by_label("Password")).to_have_count(0)
    page.get_by_role("link", name=LABEL).click()
    expect(page).to_have_url(re.compile(rf"^{re.escape(provider.url)}/login/"))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(USERS[username][1])
    page.get_by_role("button", name="Sign in at the provider").click()
    expect(page.locator(".who")).to_have_text(username)


def _groups(portal, username) -> str:
    return portal.shell(
        "from django.contrib.auth.models import User; "
        f"print(','.join(sorted(User.objects.get(username={username!r}).groups.values_list('name', flat=True))))"
    ).strip()


def test_sign_in_creates_the_user_with_groups_sign_out_ends_both_sessions_and_a_second_updates_them(
    portal, provider, new_page, screenshot
):
    provider.groups_set({"grace": ["research", "ops"]})
    page = _watched(new_page())

    _sign_in_through_provider(page, portal=portal, provider=provider, username="grace")
    assert _groups(portal, "grace") == "ops,research"

    provider.groups_set({"grace": ["research", "design"]})
    page.locator(".user-menu summary").click()
    page.get_by_role("button", name="Sign out").click()
    # Through the provider's logout and back to the portal's sign-in page.
    expect(page).to_have_url(f"{portal.base_url}/accounts/login/")
    expect(page.get_by_role("link", name=LABEL)).to_be_visible()
    page.goto(f"{provider.url}/whoami/")
    expect(page.locator("body")).to_have_text("")

    # The provider's session ended too: it asks for the password again.
    _sign_in_through_provider(page, portal=portal, provider=provider, username="grace")
    assert _groups(portal, "grace") == "design,research"
    screenshot(page, name="signed-in")
    assert page.csp_violations == []


def test_a_wrong_state_is_refused_with_a_page(portal, provider, new_page, screenshot):
    page = _watched(new_page(locale="zh-CN"))
    page.goto(f"{portal.base_url}/accounts/login/")
    page.get_by_role("link", name=LABEL).click()
    expect(page).to_have_url(re.compile(rf"^{re.escape(provider.url)}/login/"))

    page.goto(f"{portal.base_url}/oidc/callback/?code=made-up&state=not-the-state")
    expect(page.get_by_role("heading", name="登录被拒绝")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("此次登录不是从这里发起的")
    expect(page.locator(".who")).to_have_count(0)
    page.get_by_role("link", name="返回登录").click()
    expect(page).to_have_url(f"{portal.base_url}/accounts/login/")
    screenshot(page, name="refused")
    assert page.csp_violations == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_sign_in_and_refusal_pages_have_no_serious_accessibility_violation(portal, new_page, scheme):
    # CSP bypassed for axe's injected script alone.
    page = new_page(color_scheme=scheme, bypass_csp=True)
    page.goto(f"{portal.base_url}/accounts/login/")
    expect(page.get_by_role("link", name=LABEL)).to_be_visible()
    found = _violations(page, state="sign-in")
    page.goto(f"{portal.base_url}/oidc/callback/?code=made-up&state=not-the-state")
    expect(page.get_by_role("alert")).to_be_visible()
    found += _violations(page, state="refused")
    assert found == []
