"""Sign-ins, failed sign-ins and sign-outs, from django.contrib.auth's
signals: the password form and single sign-on alike."""

from axes.helpers import get_client_ip_address
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.dispatch import receiver

from .models import AuditEvent
from .services import audit_record


def _address(request) -> str | None:
    # The address django-axes locks out by, so the two agree.
    return get_client_ip_address(request) if request is not None else None


@receiver(user_logged_in, dispatch_uid="audit-sign-in")
def _signed_in(sender, request, user, **kwargs):
    backend = getattr(user, "backend", "") or ""
    audit_record(
        action=AuditEvent.Action.SIGN_IN,
        actor=user,
        address=_address(request),
        detail={"by": "single sign-on" if "oidc" in backend.lower() else "password"},
    )


@receiver(user_login_failed, dispatch_uid="audit-sign-in-failed")
def _sign_in_failed(sender, credentials, request=None, **kwargs):
    tried = str(credentials.get(get_user_model().USERNAME_FIELD) or credentials.get("username") or "")
    audit_record(action=AuditEvent.Action.SIGN_IN_FAILED, actor_name=tried, address=_address(request))


@receiver(user_logged_out, dispatch_uid="audit-sign-out")
def _signed_out(sender, request, user, **kwargs):
    if user is not None:
        audit_record(action=AuditEvent.Action.SIGN_OUT, actor=user, address=_address(request))
