import lxml.html
import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from accounts import sso
from accounts.models import ProviderGroup, ProviderMembership

pytestmark = pytest.mark.django_db


def test_an_admin_maps_a_claim_value_to_a_group_of_theirs_which_sign_ins_then_fill(staff_client):
    research = Group.objects.create(name="研究组")
    response = staff_client.post(
        reverse("admin:accounts_providergroup_add"), {"claim": "research-team", "group": research.pk}
    )
    assert response.status_code == 302
    mapping = ProviderGroup.objects.get(claim="research-team")
    assert mapping.group == research

    # The group is the row's key: it is shown, not edited.
    change = staff_client.get(reverse("admin:accounts_providergroup_change", args=[research.pk]))
    page = lxml.html.fromstring(change.content.decode())
    assert not page.xpath("//*[@name='group']")
    assert "研究组" in page.text_content()

    ada = User.objects.create_user("ada")
    sso.user_groups_sync(user=ada, names={"research-team"}, create=False, prefix="")
    assert list(ada.groups.all()) == [research]


def test_a_provider_membership_deleted_in_the_admin_leaves_the_person_in_the_group(staff_client):
    ada = User.objects.create_user("ada")
    sso.user_groups_sync(user=ada, names={"research"}, create=True, prefix="")
    membership = ProviderMembership.objects.get(user=ada)

    listed = staff_client.get(
        reverse("admin:accounts_providermembership_changelist"), headers={"accept-language": "zh-hans"}
    )
    assert "身份提供方建立的成员关系" in listed.content.decode()
    assert staff_client.get(reverse("admin:accounts_providermembership_add")).status_code == 403

    deleted = staff_client.post(
        reverse("admin:accounts_providermembership_delete", args=[membership.pk]), {"post": "yes"}
    )
    assert deleted.status_code == 302
    assert not ProviderMembership.objects.exists()
    # The membership is the admin's now: a sign-in no longer naming the group keeps it.
    sso.user_groups_sync(user=ada, names=set(), create=True, prefix="")
    assert list(ada.groups.values_list("name", flat=True)) == ["research"]
