from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib.auth import middleware as auth_middleware
from django.contrib.auth.views import redirect_to_login
from django.utils.cache import add_never_cache_headers
from django.utils.deprecation import MiddlewareMixin
from django_htmx.http import HttpResponseClientRedirect
from whitenoise.middleware import WhiteNoiseMiddleware


class LoginRequiredMiddleware(auth_middleware.LoginRequiredMiddleware):
    """Every page needs a signed-in user; an HTMX request is sent to the login
    page as a whole-page redirect, not a login form swapped into a fragment.
    Signing in again leads back to the page the request came from (a message
    sent after the session ended is a POST, which no link can repeat), where
    the browser still keeps the unsent draft."""

    def handle_no_permission(self, request, view_func):
        htmx = getattr(request, "htmx", False)
        if htmx and htmx.current_url_abs_path:
            return HttpResponseClientRedirect(redirect_to_login(htmx.current_url_abs_path).url)
        response = super().handle_no_permission(request, view_func)
        if htmx:
            return HttpResponseClientRedirect(response.url)
        return response


class PrivateCacheMiddleware(MiddlewareMixin):
    """A signed-in user's pages and downloads are never kept by a browser's or
    a proxy's cache, where the next person at a shared computer (or behind the
    same proxy) could open them."""

    def process_response(self, request, response):
        if request.user.is_authenticated:
            add_never_cache_headers(response)
        return response


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise, able to run in an async middleware chain too.

    Django runs the chain asynchronously only when every middleware can; one
    that cannot makes every request hold a thread until the view returns, an
    async view's too (artifacts.views.artifact_pane reads uploads that way).
    """

    async_capable = True

    def __init__(self, get_response=None, settings=settings):
        super().__init__(get_response, settings)
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self._acall(request)
        return super().__call__(request)

    async def _acall(self, request):
        if self.autorefresh:
            static_file = await sync_to_async(self.find_file)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve)(static_file, request)
        return await self.get_response(request)
