import logging

from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from . import health, metrics

logger = logging.getLogger(__name__)


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
    return _unavailable_logged(body) if not ready else HttpResponse(body, content_type="text/plain")


@login_not_required
@never_cache
@require_GET
def metrics_view(request):
    """Prometheus' scrape, for a scraper allowed by token or address; anyone else finds nothing here."""
    allowed = metrics.scrape_allowed(
        authorization=request.headers.get("Authorization", ""), address=request.META.get("REMOTE_ADDR", "")
    )
    if not allowed:
        raise Http404
    try:
        scraped = metrics.scrape()
    except OSError:
        logger.warning("/metrics could not read the counts' directory", exc_info=True)
        return _unavailable_logged("The counts cannot be read; the log says why.\n")
    return HttpResponse(scraped, content_type=CONTENT_TYPE_LATEST)


def _unavailable_logged(body: str) -> HttpResponse:
    """A 503 whose cause was logged as a warning where it was found; without
    this, Django would also log every probe's or scrape's 503 as an error."""
    response = HttpResponse(body, content_type="text/plain", status=503)
    response._has_been_logged = True
    return response
