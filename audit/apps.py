from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = _("Audit trail")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group

        from . import signals  # noqa: F401  (sign-ins, sign-outs and failed sign-ins)
        from .services import changes_track

        # The other apps register what of theirs is tracked in their own ready().
        changes_track(get_user_model(), secrets=("password",), ignored=("last_login",))
        changes_track(Group)
