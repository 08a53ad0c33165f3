from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in
from django.db.models.signals import m2m_changed
from django.dispatch import receiver

from . import services
from .models import ProviderMembership


@receiver(user_logged_in, dispatch_uid="accounts.session_language")
def session_language_on_login(sender, request, user, **kwargs):
    # Read once per sign-in: every page after it finds the language in the session.
    if request is not None and hasattr(request, "session"):
        services.session_language_load(user=user, session=request.session)


@receiver(m2m_changed, sender=get_user_model().groups.through, dispatch_uid="accounts.provider_membership_ended")
def provider_membership_ended(*, instance, action, reverse, pk_set, **kwargs):
    """A membership ended, by a sign-in or by an admin, is no longer the
    provider's: if the admin adds the person again, it is the admin's."""
    if action not in ("post_remove", "post_clear"):
        return
    if reverse:
        # group.user_set.remove(...) or .clear(): this group's.
        ended = ProviderMembership.objects.filter(group=instance)
        if action == "post_remove":
            ended = ended.filter(user_id__in=pk_set)
    else:
        ended = ProviderMembership.objects.filter(user=instance)
        if action == "post_remove":
            ended = ended.filter(group_id__in=pk_set)
    ended.delete()
