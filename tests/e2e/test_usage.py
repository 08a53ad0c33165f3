"""The usage page in the browser: a staff member's tables at every size,
scheme and language, and a person past most of today's budget told under the message box."""

import pytest
from playwright.sync_api import expect

from tests.e2e.test_first_turn import sign_in
from tests.e2e.test_layout import sizes_schemes_languages

pytestmark = pytest.mark.e2e

# Whether the page itself scrolls sideways: a wide table scrolls inside its own box instead.
PAGE_WIDER_JS = "() => document.documentElement.scrollWidth > window.innerWidth + 1"


def _use_seed(portal, *, staff: str, people: list[str]) -> None:
    portal.shell(
        "import datetime; from django.contrib.auth import get_user_model; from django.utils import timezone; "
        "from agents.models import TokenBudget, TokenSpend, TokenUse; "
        f"User = get_user_model(); User.objects.filter(username={staff!r}).update(is_staff=True, is_superuser=True); "
        "today = timezone.localdate(); "
        f"people = [User.objects.get_or_create(username=name)[0] for name in {people!r}]; "
        "[TokenUse.objects.get_or_create(user=person, day=today - datetime.timedelta(days=back), model=model, "
        "kind=kind, defaults=dict(calls=4, input_tokens=120_000 * (n + 1), cached_tokens=30_000, output_tokens=9_000)) "
        "for n, person in enumerate(people) for back in range(0, 12, 3) "
        "for model, kind in (('deep-model', 'lead_agent'), ('fast-model', 'search_agent'), ('deep-model', 'title'))]; "
        "TokenBudget.objects.get_or_create(user=people[0], defaults=dict(daily_tokens=600_000)); "
        "TokenSpend.objects.update_or_create(user=people[0], day=today, defaults=dict(tokens=540_000))"
    )


def test_everyones_usage_reads_at_every_size_scheme_and_language(portal, new_page, screenshot):
    staff = portal.user_create(prefix="e2e-usage-staff")
    people = [f"e2e-usage-{staff.username[-8:]}", f"研究员-{staff.username[-8:]}"]
    _use_seed(portal, staff=staff.username, people=people)
    page = new_page()
    sign_in(page, portal=portal, user=staff)
    page.locator(".user-menu > summary").click()
    page.get_by_role("link", name="Usage").click()
    expect(page.get_by_role("heading", name="Usage", level=1)).to_be_visible()

    for size, scheme, language in sizes_schemes_languages(page):
        where = f"{size}-{scheme}-{language}"
        people_table = page.locator('table[data-table="person"]')
        expect(people_table.get_by_role("link", name=people[1])).to_be_visible()
        # Past 80 % of the budget: the share is marked in the person's row.
        expect(people_table.locator("tr", has_text=people[0])).to_contain_text("(90%)")
        assert not page.evaluate(PAGE_WIDER_JS), where
        screenshot(page, name=where)

    page.locator('table[data-table="person"]').get_by_role("link", name=people[1]).click()
    expect(page.locator('table[data-table="person"] tbody tr')).to_have_count(1)
    with page.expect_download() as download:
        page.locator(".usage-csv").click()
    assert people[1] in download.value.path().read_text(encoding="utf-8-sig")


def test_a_person_past_most_of_todays_budget_is_told_under_the_message_box(portal, new_page, screenshot):
    person = portal.user_create(prefix="e2e-usage-person")
    _use_seed(portal, staff="nobody", people=[person.username])
    page = new_page(viewport={"width": 390, "height": 844})
    sign_in(page, portal=portal, user=person)

    note = page.locator("#budget-notice")
    expect(note).to_contain_text("You have used 90% of today's token budget: 540,000 of 600,000 tokens.")
    expect(page.get_by_role("button", name="Send")).to_be_in_viewport()
    screenshot(page, name="composer-390")
    page.goto(f"{portal.base_url}/usage/")
    expect(page.get_by_role("heading", name="Your usage", level=1)).to_be_visible()
    expect(page.locator('table[data-table="person"]')).to_have_count(0)
    assert not page.evaluate(PAGE_WIDER_JS)
    screenshot(page, name="own-390")
