from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView

# Registers the <id:…> and <artifact:…> converters the apps' URLconfs use.
import artifactflow.ids  # noqa: F401
from accounts.views import (
    PasswordSetView,
    SignInView,
    SignOutView,
    SsoCallbackView,
    SsoStartView,
    language_set,
    password_set_done,
    settings_page,
)
from agents.views import usage_page
from artifactflow import views
from library.urls import sources_urlpatterns

urlpatterns = [
    # Probes (docs/deploy.md): the process answers; the portal can serve a turn.
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", views.metrics_view, name="metrics"),
    # For browsers that ask for /favicon.ico whatever the page links, signed in or not.
    path("favicon.ico", login_not_required(RedirectView.as_view(url=static("favicon.svg")))),
    # The library's documents were agents' in the admin until the library became an app of its own.
    re_path(
        r"^admin/agents/librarydocument/(?P<rest>.*)$",
        staff_member_required(
            RedirectView.as_view(url="/admin/library/librarydocument/%(rest)s", permanent=True, query_string=True)
        ),
    ),
    path("admin/", admin.site.urls),
    # No password reset by e-mail: a self-hosted portal often has no mail
    # server, and an administrator resets passwords in the admin.
    path("accounts/login/", SignInView.as_view(), name="login"),
    path("accounts/logout/", SignOutView.as_view(), name="logout"),
    # Single sign-on (OpenID Connect; 404 unless ARTIFACTFLOW_OIDC_ISSUER is set).
    path("oidc/authenticate/", login_not_required(SsoStartView.as_view()), name="oidc_authentication_init"),
    path("oidc/callback/", login_not_required(SsoCallbackView.as_view()), name="oidc_authentication_callback"),
    # The one-time links of people added in bulk (accounts.onboarding); no reset by e-mail for the rest.
    path("accounts/password/<uidb64>/<token>/", PasswordSetView.as_view(), name="password-set"),
    path("accounts/password/done/", password_set_done, name="password-set-done"),
    path("accounts/settings/", settings_page, name="settings"),
    # Django's own names, for whatever links to them: the settings page changes the password.
    path("accounts/password_change/", RedirectView.as_view(pattern_name="settings"), name="password_change"),
    # The language menu, on the sign-in page too.
    path("accounts/language/", login_not_required(language_set), name="language-set"),
    path("accounts/password_change/done/", RedirectView.as_view(pattern_name="settings"), name="password_change_done"),
    path("usage/", usage_page, name="usage"),
    path("runs/", include("agents.urls")),
    path("library/", include("library.urls")),
    path("sources/", include(sources_urlpatterns)),
    path("", include("projects.urls")),
    path("", include("conversations.urls")),
]
