import logging

import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import PasswordChangeForm
from django.contrib.auth.views import LoginView, LogoutView, PasswordResetConfirmView
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpResponseBadRequest, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.utils.decorators import method_decorator
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods, require_POST
from django.views.i18n import set_language
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from agents.usage import usage_summary
from projects.selectors import schedules_of

from . import oidc, services
from .models import UserPreference

logger = logging.getLogger(__name__)


@require_POST
def language_set(request):
    """The language menu: Django's set_language (the cookie, the redirect back),
    and for a signed-in user their lasting choice too. Only a language the
    portal speaks: set_language would take any Django has a catalogue for."""
    language = request.POST.get("language", "")
    if not services.language_supported(language):
        return HttpResponseBadRequest()
    if request.user.is_authenticated:
        services.user_language_set(user=request.user, session=request.session, language=language)
    return set_language(request)


@require_http_methods(["GET", "POST"])
def settings_page(request):
    """The user's own settings: theme, language (posted to language_set) and password.
    Each form posts here on its own, named by `form`; a change redirects back."""
    password_form = PasswordChangeForm(request.user)
    if request.method == "POST":
        if request.POST.get("form") == "theme":
            theme = request.POST.get("theme", "")
            if theme not in UserPreference.Theme.values:
                return HttpResponseBadRequest()
            services.user_theme_set(user=request.user, session=request.session, theme=theme)
            messages.success(request, gettext("Your theme is saved."))
            return redirect("settings")
        # A single sign-on user's password is the provider's: there is none here to change.
        if request.POST.get("form") != "password" or not request.user.has_usable_password():
            return HttpResponseBadRequest()
        password_form = PasswordChangeForm(request.user, request.POST)
        if password_form.is_valid():
            user = password_form.save()
            # The new password's hash, so this session stays signed in (other sessions end).
            update_session_auth_hash(request, user)
            messages.success(request, gettext("Your password was changed."))
            return redirect("settings")
    # Django's form focuses its first field: the page would open scrolled down to the password.
    password_form.fields["old_password"].widget.attrs.pop("autofocus", None)
    return render(
        request,
        "accounts/settings.html",
        {
            "password_form": password_form,
            "themes": UserPreference.Theme.choices,
            "schedules": schedules_of(user=request.user),
            **usage_summary(user=request.user),
        },
        status=422 if password_form.is_bound else 200,
    )


class SignInView(LoginView):
    """The sign-in page: the password form and, with single sign-on, its
    button; only the button when passwords are for staff alone."""

    def get_context_data(self, **kwargs):
        return super().get_context_data(
            sso_enabled=settings.SSO_ENABLED,
            sso_label=settings.SSO_BUTTON_LABEL,
            passwords_for_all=settings.LOCAL_PASSWORDS == "all",
            **kwargs,
        )


class SignOutView(LogoutView):
    """Signs out of the portal and, for a single sign-on, of the provider
    too where it offers RP-initiated logout."""

    def post(self, request, *args, **kwargs):
        id_token = request.session.get("oidc_id_token") if settings.SSO_ENABLED else None
        response = super().post(request, *args, **kwargs)
        if id_token is not None and (url := oidc.logout_url(request=request, id_token=id_token)):
            return HttpResponseRedirect(url)
        return response


def sso_refused(request, *, reason: str):
    """The page a refused single sign-on ends on, saying why."""
    status = 503 if reason == "provider" else 403
    return render(request, "registration/sso_refused.html", {"reason": reason}, status=status)


class SsoStartView(OIDCAuthenticationRequestView):
    """Sends the browser to the provider (state, nonce and PKCE kept in the session)."""

    def __init__(self, *args, **kwargs):
        # The library reads the endpoint here; it comes from discovery, when a sign-in starts.
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID

    def get(self, request):
        if not settings.SSO_ENABLED:
            raise Http404
        try:
            self.OIDC_OP_AUTH_ENDPOINT = oidc.endpoint("authorization_endpoint")
        except oidc.SignInRefused as refusal:
            logger.warning("Single sign-on could not start: %s", refusal)
            return sso_refused(request, reason=refusal.reason)
        return super().get(request)


class SsoCallbackView(OIDCAuthenticationCallbackView):
    """Where the provider sends the browser back: the library checks the state
    and the backend (accounts.oidc) the token; a refusal is a page saying why."""

    def get(self, request):
        if not settings.SSO_ENABLED:
            raise Http404
        try:
            return super().get(request)
        except oidc.SignInRefused as refusal:
            logger.warning("Single sign-on refused: %s", refusal)
            return sso_refused(request, reason=refusal.reason)
        except SuspiciousOperation as error:
            # A state this browser's session never started (or already used).
            logger.warning("Single sign-on refused: %s", error)
            return sso_refused(request, reason="state")
        except requests.RequestException as error:
            logger.warning("Single sign-on failed: the provider did not answer: %s", error)
            return sso_refused(request, reason="provider")

    def login_failure(self):
        if self.request.GET.get("error"):
            reason = "cancelled"
        elif getattr(self, "user", None) is not None:
            reason = "inactive"
        else:
            reason = "state"
        return sso_refused(self.request, reason=reason)


@method_decorator(login_not_required, name="dispatch")
class PasswordSetView(PasswordResetConfirmView):
    """A one-time set-password link (accounts.onboarding): Django's reset
    confirmation, which hides the token from the address bar and refuses a
    used or expired link. Signs nobody in: the person signs in as usual."""

    template_name = "registration/password_set.html"
    success_url = reverse_lazy("password-set-done")


@login_not_required
def password_set_done(request):
    return render(request, "registration/password_set.html", {"done": True})
