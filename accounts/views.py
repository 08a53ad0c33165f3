from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.forms import PasswordChangeForm
from django.http import HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods, require_POST
from django.views.i18n import set_language

from . import services
from .models import UserPreference


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
        if request.POST.get("form") != "password":
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
        {"password_form": password_form, "themes": UserPreference.Theme.choices},
        status=422 if password_form.is_bound else 200,
    )
