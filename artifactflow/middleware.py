from django.contrib.auth import middleware as auth_middleware
from django.utils.cache import add_never_cache_headers
from django_htmx.http import HttpResponseClientRedirect


class LoginRequiredMiddleware(auth_middleware.LoginRequiredMiddleware):
    """Every page needs a signed-in user; an HTMX request is sent to the login
    page as a whole-page redirect, not a login form swapped into a fragment."""

    def handle_no_permission(self, request, view_func):
        response = super().handle_no_permission(request, view_func)
        if getattr(request, "htmx", False):
            return HttpResponseClientRedirect(response.url)
        return response


class PrivateCacheMiddleware:
    """A signed-in user's pages and downloads are never kept by a browser's or
    a proxy's cache, where the next person at a shared computer (or behind the
    same proxy) could open them."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if request.user.is_authenticated:
            add_never_cache_headers(response)
        return response
