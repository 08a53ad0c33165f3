from django.utils import translation
from django.utils.deprecation import MiddlewareMixin

from . import services


class UserLanguageMiddleware(MiddlewareMixin):
    """A signed-in user's chosen language beats what LocaleMiddleware read from
    the browser (Accept-Language or the language cookie)."""

    def process_request(self, request):
        if not request.user.is_authenticated:
            return
        language = services.session_language(session=request.session)
        if language:
            translation.activate(language)
            request.LANGUAGE_CODE = translation.get_language()
