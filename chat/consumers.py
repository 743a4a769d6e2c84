"""The chat WebSocket: authenticate, validate frames, dispatch to the session service, send events.

A thin adapter (STYLE.md): queue semantics live in the SessionController. Events of this process's
sessions arrive on the controller's subscriber queue and are sent directly (no channel-layer hop).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from agentsite.db import database_sync_to_async
from agentsite.services import api_key_is_active
from chat import frames
from chat.cluster import OwnerUnavailable, RemoteError
from chat.controller import InputError
from chat.exceptions import ChatError
from chat.hub import Attachment, NotOwner, control_group, get_hub, message_submit
from chat.service import Cancel, ConfirmationReply, Remove, Steer
from chat.services import session_get_open_for_user

logger = logging.getLogger(__name__)

CLOSE_UNAUTHORIZED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_CLOSED = 4410
CLOSE_TOO_BIG = 1009
CLOSE_KEY_REVOKED = 4401
CLOSE_TRY_AGAIN = 1012  # "service restart": reconnect (with ?since=) and land on the session's new owner
_MOVED: dict[str, Any] = {"type": "__moved__"}


def dumps(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False, default=str)


class ChatConsumer(AsyncWebsocketConsumer):
    session_id: str
    group: str | None = None
    queue: asyncio.Queue[dict[str, Any]] | None = None
    attachment: Attachment | None = None
    sender: asyncio.Task[None] | None = None
    sent_seq: int = 0

    async def connect(self) -> None:
        self.session_id = self.scope["url_route"]["kwargs"]["session_id"]
        await self.accept()
        if self.scope.get("auth_error") or not self.scope["user"].is_authenticated:
            message = (
                self.scope.get("auth_error") or "Authentication required: pass ?api_key=<key> or log in."
            )
            await self._refuse("unauthorized", message, CLOSE_UNAUTHORIZED)
            return
        try:
            await database_sync_to_async(session_get_open_for_user)(
                user=self.scope["user"], session_id=self.session_id
            )
        except ChatError as exc:
            close_code = CLOSE_CLOSED if exc.code == "session_closed" else CLOSE_NOT_FOUND
            await self._refuse(
                "closed" if exc.code == "session_closed" else "not_found", exc.message, close_code
            )
            return
        hub = get_hub()
        self.group = control_group(self.session_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        try:
            attachment = await hub.attach(self.session_id, self._since())
        except (OwnerUnavailable, RemoteError, NotOwner):
            await self._refuse(
                "unavailable", "The session is changing server process; reconnect.", CLOSE_TRY_AGAIN
            )
            return
        self.attachment = attachment
        self.queue = attachment.queue
        hub.register(self.session_id, self)
        connected = {
            "type": "connected",
            "session_id": self.session_id,
            "snapshot": attachment.snapshot,
            "last_seq": attachment.last_seq,
        }
        await self.send(dumps(connected))
        self.sent_seq = attachment.last_seq
        if attachment.backlog is None:
            await self.send(
                dumps({"type": "resync", "snapshot": attachment.snapshot, "last_seq": attachment.last_seq})
            )
        else:
            for event in attachment.backlog:
                await self.send(dumps(event))
        self.sender = asyncio.get_running_loop().create_task(self._send_events(self.queue))

    def session_moved(self) -> None:
        """This process lost the session to another one: the client reconnects (resuming with since)."""
        # Only sockets fed by this process's controller: those fed by a mirror keep working.
        if self.queue is not None and self.attachment is not None and self.attachment.local:
            self.queue.put_nowait(_MOVED)

    def _since(self) -> int | None:
        from urllib.parse import parse_qs

        values = parse_qs(self.scope.get("query_string", b"").decode("latin-1")).get("since")
        if not values:
            return None
        try:
            return max(int(values[0]), 0)
        except ValueError:
            return 0

    async def _refuse(self, code: str, message: str, close_code: int) -> None:
        await self.send(dumps({"type": "error", "data": {"code": code, "message": message}}))
        await self.close(code=close_code)

    async def _send_events(self, queue: asyncio.Queue[dict[str, Any]]) -> None:
        while True:
            # Take everything that is waiting in one wake-up: a streaming turn publishes bursts.
            batch = [await queue.get()]
            while not queue.empty():
                batch.append(queue.get_nowait())
            for event in batch:
                if event is _MOVED:
                    await self.close(code=CLOSE_TRY_AGAIN)
                    return
                seq = event.get("seq")
                if seq is not None:
                    if seq <= self.sent_seq:
                        continue  # already in the snapshot or the replay
                    self.sent_seq = seq
                await self.send(dumps(event))

    async def disconnect(self, code: int) -> None:
        if self.sender is not None:
            self.sender.cancel()
            await asyncio.gather(self.sender, return_exceptions=True)
            self.sender = None
        hub = get_hub()
        if self.attachment is not None:
            await hub.detach(self.attachment)
            hub.unregister(self.session_id, self)
            self.attachment = None
            self.queue = None
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        raw = text_data if text_data is not None else (bytes_data or b"").decode("utf-8", "replace")
        if len(raw.encode("utf-8")) > settings.AGENTSITE_WS_MAX_FRAME_BYTES:
            await self.close(code=CLOSE_TOO_BIG)
            return
        if self.queue is None:
            return  # refused at connect; the close is on its way
        try:
            data = json.loads(raw)
        except ValueError:
            logger.info("ignored a non-JSON frame on session %s", self.session_id)
            return
        if not isinstance(data, dict) or data.get("type") not in frames.KNOWN_TYPES:
            logger.info("ignored a frame of unknown type on session %s", self.session_id)
            return
        if self.scope.get("api_key") and not await database_sync_to_async(api_key_is_active)(
            self.scope["api_key"]
        ):
            await self._refuse("unauthorized", "The api_key was revoked.", CLOSE_KEY_REVOKED)
            return
        try:
            frame = frames.parse_frame(data)
        except frames.InvalidFrame as exc:
            await self._error(exc.code, exc.message)
            return
        try:
            await self._handle(frame)
        except InputError as exc:
            await self._error(exc.code, exc.message, message_id=exc.message_id)

    async def _handle(self, frame: Any) -> None:
        service = get_hub()
        match frame:
            case frames.Ping():
                await self.send(dumps({"type": "pong"}))
            case frames.MessageFrame():
                await message_submit(
                    session_id=self.session_id,
                    content=frame.content,
                    message_id=frame.message_id,
                    steer=frame.steer,
                    config=frame.config.model_dump() if frame.config else None,
                    approval_mode=frame.approval_mode,
                    model=frame.model,
                )
            case frames.SteerFrame():
                await service.dispatch(self.session_id, Steer(message_id=frame.message_id))
            case frames.RemoveFrame():
                await service.dispatch(self.session_id, Remove(message_id=frame.message_id))
            case frames.CancelFrame():
                await service.dispatch(self.session_id, Cancel())
            case frames.ConfirmationReplyFrame():
                await service.dispatch(
                    self.session_id,
                    ConfirmationReply(
                        confirmation_id=frame.confirmation_id,
                        approved=frame.approved,
                        option_id=frame.option_id,
                    ),
                )

    async def _error(self, code: str, message: str, *, message_id: str | None = None) -> None:
        data: dict[str, Any] = {"code": code, "message": message}
        if message_id is not None:
            data["message_id"] = message_id
        await self.send(dumps({"type": "error", "data": data}))

    async def session_closed(self, event: dict[str, Any]) -> None:
        """The session was deleted (on any process): tell this socket and close it."""
        await self._refuse("closed", f"Session {self.session_id} is closed", CLOSE_CLOSED)
