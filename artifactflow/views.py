from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from . import health


@login_not_required
@never_cache
@require_GET
def healthz(request):
    """The process answers: nothing else is asked."""
    return HttpResponse("ok\n", content_type="text/plain")


@login_not_required
@never_cache
@require_GET
def readyz(request):
    """200 when the database, the channel layer and a worker are there; 503, saying which is not, otherwise."""
    states = health.readiness_check()
    ready = all(state == "ok" for state in states.values())
    body = "".join(f"{part}: {state}\n" for part, state in states.items())
    response = HttpResponse(body, content_type="text/plain", status=200 if ready else 503)
    # Each failing part is logged once as a warning (health); without this,
    # Django would also log every probe's 503 as an error.
    response._has_been_logged = True
    return response
