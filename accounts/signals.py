from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver

from . import services


@receiver(user_logged_in, dispatch_uid="accounts.session_language")
def session_language_on_login(sender, request, user, **kwargs):
    # Read once per sign-in: every page after it finds the language in the session.
    if request is not None and hasattr(request, "session"):
        services.session_language_load(user=user, session=request.session)
