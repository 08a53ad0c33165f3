"""The audit trail in the admin, in the browser: read at every size, scheme
and language, a record's changes before and after, and nothing to edit."""

import pytest
from playwright.sync_api import expect

from tests.e2e.test_first_turn import sign_in
from tests.e2e.test_layout import LANGUAGES, SCHEMES, SIZES

pytestmark = pytest.mark.e2e


def test_the_audit_trail_reads_at_every_size_scheme_and_language(portal, new_page, screenshot):
    staff = portal.user_create(prefix="e2e-audit-staff")
    portal.shell(
        "from django.contrib.auth import get_user_model; from django.contrib.auth.models import Group; "
        "from audit.models import AuditEvent; from audit.services import audit_context, audit_record; "
        f"me = get_user_model().objects.get(username={staff.username!r}); "
        "get_user_model().objects.filter(pk=me.pk).update(is_staff=True, is_superuser=True); "
        "audit_record(action=AuditEvent.Action.SIGN_IN_FAILED, actor_name='陌生人', address='203.0.113.66'); "
        "ctx = audit_context(user=me, address='198.51.100.4'); ctx.__enter__(); "
        f"group = Group.objects.create(name='研究组-{staff.username[-8:]}'); group.name = '热泵研究组-{staff.username[-8:]}'; group.save(); "
        "ctx.__exit__(None, None, None)"
    )
    page = new_page()
    sign_in(page, portal=portal, user=staff)
    for language in LANGUAGES:
        page.set_viewport_size({"width": 1366, "height": 900})
        page.goto(f"{portal.base_url}/")
        page.locator("#language-select").select_option(language)
        expect(page.locator("html")).to_have_attribute("lang", language)
        page.goto(f"{portal.base_url}/admin/audit/auditevent/")
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            for scheme in SCHEMES:
                page.emulate_media(color_scheme=scheme)
                rows = page.locator("#result_list tbody tr")
                expect(rows.filter(has_text="陌生人")).to_have_count(1)
                expect(rows.filter(has_text="203.0.113.66")).to_have_count(1)
                expect(page.locator(".object-tools a[href*='/export/']")).to_be_visible()
                assert page.locator(".object-tools a[href$='/add/']").count() == 0
                screenshot(page, name=f"{size}-{scheme}-{language}")

    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#result_list tbody tr", has_text="热泵研究组").first.locator("th a").click()
    changes = page.locator(".field-changes_table table")
    expect(changes).to_contain_text("研究组-")
    expect(changes).to_contain_text("热泵研究组-")
    assert page.locator("input[name='_save'], .deletelink").count() == 0
    screenshot(page, name="record-phone")
