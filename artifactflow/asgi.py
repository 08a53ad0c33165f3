import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "artifactflow.settings")
# Django must be set up before the routing imports consumers and models.
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.utils import translation  # noqa: E402

from accounts.services import scope_language  # noqa: E402
from artifactflow.limits import RequestBodyLimit  # noqa: E402
from artifactflow.origins import OriginValidator  # noqa: E402
from artifacts.uploads import upload_too_large_message  # noqa: E402
from live.routing import websocket_urlpatterns  # noqa: E402


def _upload_refusal(scope) -> str:
    # In the page's language: the upload form shows these words (app.js).
    with translation.override(scope_language(scope=scope)):
        return upload_too_large_message()


application = ProtocolTypeRouter(
    {
        "http": RequestBodyLimit(django_asgi_app, refusal=_upload_refusal),
        "websocket": OriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
