from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from axes.helpers import get_client_ip_address

from .services import audit_context


class AuditContextMiddleware:
    """What a request records is by its signed-in user, from its address.
    Async as well as sync, so an async view (an upload being read) holds no
    thread for it."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self._acall(request)
        with audit_context(user=getattr(request, "user", None), address=get_client_ip_address(request)):
            return self.get_response(request)

    async def _acall(self, request):
        with audit_context(user=getattr(request, "user", None), address=get_client_ip_address(request)):
            return await self.get_response(request)
