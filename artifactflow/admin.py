from django.contrib import messages
from django.core.exceptions import ValidationError


class ServiceDeleteMixin:
    """For a ModelAdmin whose delete_model calls a service that may refuse
    (a ValidationError): the delete page says why and keeps the object,
    instead of a server error."""

    def delete_view(self, request, object_id, extra_context=None):
        try:
            return super().delete_view(request, object_id, extra_context)
        except ValidationError as exc:
            self.message_user(request, " ".join(exc.messages), messages.ERROR)
            return self.response_post_save_change(request, None)
