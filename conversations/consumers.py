from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer, WebsocketConsumer
from django.template.loader import render_to_string

from . import selectors

ARTIFACTS_CHANGED_SIGNAL = '<div id="artifacts-changed" hx-swap-oob="true" hidden></div>'


class ConversationConsumer(AsyncWebsocketConsumer):
    """Pushes a conversation's live state to its open page as HTML fragments
    that HTMX swaps in by id. Each fragment is a whole snapshot rendered from
    the database, so a dropped message is healed by the next one."""

    conversation = None

    async def connect(self):
        user = self.scope["user"]
        if user.is_authenticated:
            self.conversation = await database_sync_to_async(selectors.conversation_get)(
                user=user, conversation_id=self.scope["url_route"]["kwargs"]["conversation_id"]
            )
        if self.conversation is None:
            await self.close()
            return
        await self.channel_layer.group_add(self.conversation.group_name, self.channel_name)
        await self.accept()
        # Whatever happened while this page was loading or disconnected.
        await self.send(text_data=await database_sync_to_async(self._render_thread)())
        await self.artifacts_changed({})

    async def disconnect(self, code):
        if self.conversation is not None:
            await self.channel_layer.group_discard(self.conversation.group_name, self.channel_name)

    async def run_event(self, event):
        html = await database_sync_to_async(self._render_run)(event["run_id"])
        if html:
            await self.send(text_data=html)

    async def artifacts_changed(self, event):
        # The page re-fetches the artifact it shows (it alone knows which one).
        await self.send(text_data=ARTIFACTS_CHANGED_SIGNAL)

    def _render_thread(self) -> str:
        self.conversation.refresh_from_db()
        entries = selectors.thread_for_conversation(conversation=self.conversation)
        return render_to_string("conversations/chat.html#thread", {"entries": entries, "oob": True})

    def _render_run(self, run_id: int) -> str:
        entry = selectors.thread_entry_for_run(conversation=self.conversation, run_id=run_id)
        if entry is None:
            return ""
        return render_to_string("conversations/chat.html#message", {"entry": entry, "oob": True})


class NotFoundConsumer(WebsocketConsumer):
    """Refuses a websocket on a path nothing serves."""

    def connect(self):
        self.close()
