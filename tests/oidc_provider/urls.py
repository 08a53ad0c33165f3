from django.contrib.auth.views import LoginView
from django.http import HttpResponse
from django.urls import include, path


def whoami(request):
    """Who is signed in at the provider: a test sees its session end."""
    return HttpResponse(request.user.username if request.user.is_authenticated else "")


urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("login/", LoginView.as_view(), name="login"),
    path("whoami/", whoami),
]
