from django.http import HttpResponseBadRequest
from django.views.decorators.http import require_POST
from django.views.i18n import set_language

from . import services


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
