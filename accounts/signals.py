from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in
from django.db import transaction
from django.db.models.signals import m2m_changed, post_save
from django.dispatch import receiver

from . import onboarding, services
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


@receiver(post_save, sender=get_user_model(), dispatch_uid="accounts.sessions_end_on_deactivation")
def sessions_end_on_deactivation(*, instance, created, update_fields, **kwargs):
    """A deactivated person is signed out everywhere at once: their sessions
    are deleted once the change commits (their open pages' websockets close
    as they check their session: live.signals)."""
    if created or instance.is_active or (update_fields is not None and "is_active" not in update_fields):
        return
    transaction.on_commit(lambda: onboarding.user_sessions_end(user_id=instance.pk))
