from django.contrib.auth import middleware as auth_middleware
from django_htmx.http import HttpResponseClientRedirect


class LoginRequiredMiddleware(auth_middleware.LoginRequiredMiddleware):
    """Every page needs a signed-in user; an HTMX request is sent to the login
    page as a whole-page redirect, not a login form swapped into a fragment."""

    def handle_no_permission(self, request, view_func):
        response = super().handle_no_permission(request, view_func)
        if getattr(request, "htmx", False):
            return HttpResponseClientRedirect(response.url)
        return response
