"""Adding the team in the browser: a staff member adds people from a CSV in
the admin, and one of them opens their link, chooses a password and signs in."""

import secrets

import pytest
from playwright.sync_api import expect

from tests.e2e.test_first_turn import sign_in

pytestmark = pytest.mark.e2e


def test_people_added_from_a_csv_set_their_password_from_their_link(portal, new_page, screenshot, tmp_path):
    staff = portal.user_create(prefix="e2e-onboarding-staff")
    portal.shell(
        "from django.contrib.auth import get_user_model; "
        f"get_user_model().objects.filter(username={staff.username!r}).update(is_staff=True, is_superuser=True)"
    )
    suffix = secrets.token_hex(3)
    newcomer = f"新同事-{suffix}"
    team = tmp_path / "team.csv"
    team.write_text(
        f"username,email,groups\n{newcomer},,研究组-{suffix}\nhelper-{suffix},,研究组-{suffix}\n", encoding="utf-8"
    )
    page = new_page(viewport={"width": 1366, "height": 900})
    sign_in(page, portal=portal, user=staff)

    page.goto(f"{portal.base_url}/admin/auth/user/")
    page.get_by_role("link", name="Add people from a CSV").click()
    page.get_by_label("CSV file").set_input_files(team)
    page.get_by_label("Create the groups that do not exist yet").check()
    page.get_by_role("button", name="Check the file").click()
    expect(page.locator("table.people-rows tbody tr")).to_have_count(2)
    expect(page.locator("table.people-rows")).to_contain_text("will be added")
    screenshot(page, name="checked")
    page.get_by_role("button", name="Add 2 people").click()
    link = page.get_by_label(f"Set-password link for {newcomer}")
    expect(link).to_be_visible()
    screenshot(page, name="links")
    address = link.input_value()

    phone = new_page(viewport={"width": 390, "height": 844})
    phone.goto(address)
    expect(phone.get_by_text(f"For the account {newcomer}.")).to_be_visible()
    phone.get_by_label("New password", exact=True).fill("寒冬-heat-pump-42")
    phone.get_by_label("New password confirmation").fill("寒冬-heat-pump-42")
    screenshot(phone, name="choose-390")
    phone.get_by_role("button", name="Set my password").click()
    expect(phone.get_by_role("status")).to_have_text("Your password is set.")
    phone.get_by_role("link", name="Sign in").click()
    phone.get_by_label("Username").fill(newcomer)
    phone.get_by_label("Password").fill("寒冬-heat-pump-42")
    phone.get_by_role("button", name="Sign in").click()
    expect(phone.locator(".who")).to_have_text(newcomer)

    # Used: the link, opened again in another browser, says so.
    again = new_page(viewport={"width": 390, "height": 844})
    again.goto(address)
    expect(again.get_by_role("alert")).to_contain_text("has been used already or has expired")
