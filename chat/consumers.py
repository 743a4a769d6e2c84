"""The chat WebSocket: authenticate, validate frames, dispatch to the live sessions, send events.

A thin adapter: queue semantics live in the session's controller (chat/live/). Events of this process's
sessions arrive on the controller's subscriber queue and are sent directly (no channel-layer hop). This
is also the sockets' one translation of domain errors into `error` frames (`error_frame`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any
from urllib.parse import parse_qs

from django.conf import settings
from django.db import InterfaceError, OperationalError

from agentsite import jsonio
from agentsite.db import database_sync_to_async
from agentsite.exceptions import DomainError, RateExceeded, ServiceUnavailable
from agentsite.query import query_flag
from agentsite.validation import drf_fields, invalid
from agentsite.websocket import SocketConsumer
from audit.limits import alimit_hit_record
from chat import inputs
from chat.exceptions import TooManySockets
from chat.live import LiveSessions, Unavailable, live_sessions
from chat.live.commands import Cancel, ConfirmationReply, Remove, Steer
from chat.live.events import encode_event
from chat.live.slots import Slot
from chat.live.subscriber import End, Subscriber
from chat.serializers import SessionCreateSerializer
from chat.services import message_submit, session_get_open_for_user, session_get_or_create_open
from security.ratelimit import FRAMES_REASON, frame_allowed, scope_address

logger = logging.getLogger(__name__)

CLOSE_UNAUTHORIZED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_CLOSED = 4410
# Too many wrong api_keys from this address (docs/protocol.md §6.2), or too many sockets of the user (§6.6).
CLOSE_RATE_LIMITED = 4429
CLOSE_INVALID = 4400  # `?create=1` with fields POST would refuse, a `since` that is no seq (docs/protocol.md)
CLOSE_SESSION_EXISTS = 4409
CLOSE_TOO_BIG = 1009
CLOSE_TRY_AGAIN = 1012  # "service restart": reconnect with ?since= (agentsite/internals.py lets daphne)
# A socket sends at most this many frames of a burst before letting other tasks run: a busy server
# then still gets every new answer's first words out promptly instead of finishing others' bursts first.
SEND_SLICE = 16
# How a session that cannot be opened is refused: error code and close code, by the domain error's code.
_REFUSALS = {
    "not_found": ("not_found", CLOSE_NOT_FOUND),
    "session_closed": ("closed", CLOSE_CLOSED),
    "session_exists": ("session_exists", CLOSE_SESSION_EXISTS),
}
UNAVAILABLE_MESSAGE = "The session cannot go on in this server process now; reconnect with ?since= to resume."


class ChatConsumer(SocketConsumer):
    """One socket on one session.

    Lean per socket, because a server holds thousands of them (agentsite/internals.py): no channel-layer
    channel (events come from the live sessions; a deleted session's sockets are closed through them, on
    every process), and frames go straight to the server's `send`. On the stock stack its base is Channels'
    own consumer (agentsite/websocket.py).
    """

    session_id: str
    subscriber: Subscriber | None = None  # its events (chat/live/subscriber.py), once attached
    listening = False  # it takes frames: attached, and its account has not ended
    sender: asyncio.Task[None] | None = None
    slot: Slot | None = None  # one of its user's AGENTSITE_USER_MAX_SOCKETS, while it is open

    async def connect(self) -> None:
        self.session_id = self.scope["url_route"]["kwargs"]["session_id"]
        await self.accept()
        try:
            await self._connect()
        except (OperationalError, InterfaceError):
            await self._refuse("unavailable", "The database does not answer; reconnect.", CLOSE_TRY_AGAIN)
        except BaseException:
            self._give_back_slot()  # whatever went wrong, the socket does not keep counting
            raise

    async def _connect(self) -> None:
        if self.scope.get("unavailable"):
            await self._refuse("unavailable", "The database does not answer; reconnect.", CLOSE_TRY_AGAIN)
            return
        if self.scope.get("rate_limited"):
            await self._refuse("rate_limited", self.scope["rate_limited"], CLOSE_RATE_LIMITED)
            return
        if self.scope.get("auth_error") or not self.scope["user"].is_authenticated:
            message = (
                self.scope.get("auth_error") or "Authentication required: pass ?api_key=<key> or log in."
            )
            await self._refuse("unauthorized", message, CLOSE_UNAUTHORIZED)
            return
        live = live_sessions()
        self.slot = await live.open_connection(self.scope["user"].pk)
        if self.slot is None:
            await self._too_many_sockets()
            return
        try:
            since = inputs.parse_since(self._query("since"))
            create = self._create_fields()
            if create is None:
                await database_sync_to_async(session_get_open_for_user)(
                    user=self.scope["user"], session_id=self.session_id
                )
            else:
                await database_sync_to_async(session_get_or_create_open)(user=self.scope["user"], **create)
        except DomainError as exc:
            code, close_code = _REFUSALS.get(exc.code, (exc.code, CLOSE_INVALID))
            await self._refuse(code, exc.message, close_code, fields=exc.fields)
            return
        try:
            subscriber = await Subscriber.attach(live, self.session_id, since)
        except Unavailable:
            await self._refuse(
                "unavailable", "The session is changing server process; reconnect.", CLOSE_TRY_AGAIN
            )
            return
        self.subscriber = subscriber
        self.listening = True
        live.register(self.session_id, self)
        live.accounts.add(self, self.scope["credential"])
        for event in subscriber.opening():
            await self.send_text(encode_event(event))
        self.sender = asyncio.get_running_loop().create_task(self._send_events(subscriber))

    async def _too_many_sockets(self) -> None:
        refusal = TooManySockets(settings.AGENTSITE_USER_MAX_SOCKETS)
        await self._send_error(refusal)
        await self.close(code=CLOSE_RATE_LIMITED)
        await alimit_hit_record(
            user_id=self.scope["user"].pk,
            limit=refusal.code,
            message=refusal.message,
            details={"setting": "AGENTSITE_USER_MAX_SOCKETS", "max": refusal.limit, "socket": "websocket"},
            address=scope_address(self.scope),
        )

    def session_closed(self) -> None:
        """The session was deleted (on any process): the socket is told so and closed."""
        if self.subscriber is not None:
            self.subscriber.session_closed()

    def account_ended(self, reason: str) -> None:
        """What the socket authenticated with ended (a deactivated user, a revoked or expired key, a
        logout): it is told so and closed with 4401; frames it sends from now on are ignored."""
        if self.listening and self.subscriber is not None:
            self.listening = False
            self.subscriber.account_ended(reason)

    @functools.cached_property
    def _query_params(self) -> dict[str, list[str]]:
        # Blank values kept, as DRF keeps them for REST: `?since=` is no seq on either edge.
        return parse_qs(self.scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)

    def _query(self, name: str) -> str | None:
        values = self._query_params.get(name)
        return values[0] if values else None

    def _create_fields(self) -> dict[str, Any] | None:
        """With `?create=1`: the fields of `POST /chat/sessions` from the query (`agent_name`, `title`) and
        the path's id, validated as POST validates them; None without it."""
        if not query_flag(self._query("create"), "create"):
            return None
        data = {"session_id": self.session_id}
        for name in ("agent_name", "title"):
            if (value := self._query(name)) is not None:
                data[name] = value
        fields = SessionCreateSerializer(data=data)
        if not fields.is_valid():
            raise invalid(drf_fields(fields.errors), lead="Cannot create the session: ")
        return dict(fields.validated_data)

    async def _refuse(
        self, code: str, message: str, close_code: int, *, fields: dict[str, list[str]] | None = None
    ) -> None:
        self._give_back_slot()  # at once: the close handshake may take a while
        await self._send_error(DomainError(message, code=code, fields=fields))
        await self.close(code=close_code)

    def _give_back_slot(self) -> None:
        if self.slot is not None:
            self.slot.release()
            self.slot = None

    async def _send_events(self, subscriber: Subscriber) -> None:
        while True:
            # Everything waiting is taken in one wake-up, a slice at a time: a streaming turn publishes
            # bursts, and each slice goes to the socket in one write (agentsite/internals.py, trick 7).
            texts, end = await subscriber.take(encode_event, SEND_SLICE)
            await self.send_texts(texts)  # what was queued before the end goes first
            if end is not None:
                await self._end(end, subscriber)
                return
            if not subscriber.queue.empty():
                await asyncio.sleep(0)  # see SEND_SLICE

    async def _end(self, end: End, subscriber: Subscriber) -> None:
        if end == "unavailable":
            await self._refuse("unavailable", UNAVAILABLE_MESSAGE, CLOSE_TRY_AGAIN)
        elif end == "closed":
            await self._refuse("closed", f"Session {self.session_id} is closed", CLOSE_CLOSED)
        else:
            await self._refuse("unauthorized", subscriber.reason, CLOSE_UNAUTHORIZED)

    async def disconnect(self, code: int) -> None:
        self._give_back_slot()
        if self.sender is not None:
            self.sender.cancel()
            await asyncio.gather(self.sender, return_exceptions=True)
            self.sender = None
        live = live_sessions()
        live.accounts.discard(self)
        if self.subscriber is not None:
            self.listening = False
            await self.subscriber.detach()
            live.unregister(self.session_id, self)
            self.subscriber = None

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        raw = text_data if text_data is not None else (bytes_data or b"").decode("utf-8", "replace")
        # (surrogatepass: a server that let a lone surrogate through gets it ignored as not JSON, jsonio.py)
        if len(raw.encode("utf-8", "surrogatepass")) > settings.AGENTSITE_WS_MAX_FRAME_BYTES:
            await self.close(code=CLOSE_TOO_BIG)
            return
        if not self.listening:
            return  # refused at connect, or its account ended: the close is on its way
        try:
            data = jsonio.loads(raw)
        except jsonio.InvalidJson:
            logger.info("ignored a frame that is not JSON (or too deep) on session %s", self.session_id)
            return
        try:
            frame = inputs.parse_frame(data)
            if frame is None:
                logger.info("ignored a frame of unknown type on session %s", self.session_id)
                return
            await self._handle(frame)
        except inputs.InvalidInput as exc:
            message = f"Invalid '{data.get('type')}' frame: {exc.message}"
            await self._send_error(DomainError(message, code="invalid_frame", fields=exc.fields))
        except DomainError as exc:
            await self._send_error(exc)
        except (OperationalError, InterfaceError):
            await self._send_error(ServiceUnavailable("The database does not answer; try again in a moment."))

    async def _handle(self, frame: inputs.Frame) -> None:
        live = live_sessions()
        if not isinstance(frame, inputs.Ping):  # ping is free; the others count (docs/protocol.md §6.6)
            await self._count(frame, live)
        match frame:
            case inputs.Ping():
                await self.send_text(encode_event({"type": "pong"}))
            case inputs.MessageFrame():
                await message_submit(session_id=self.session_id, **frame.submit_options())
            case inputs.SteerFrame():
                await live.dispatch(self.session_id, Steer(message_id=frame.message_id))
            case inputs.RemoveFrame():
                await live.dispatch(self.session_id, Remove(message_id=frame.message_id))
            case inputs.CancelFrame():
                await live.dispatch(self.session_id, Cancel())
            case inputs.ConfirmationReplyFrame():
                reply = ConfirmationReply(frame.confirmation_id, frame.approved, frame.option_id)
                await live.dispatch(self.session_id, reply)

    async def _count(self, frame: inputs.Frame, live: LiveSessions) -> None:
        """RateExceeded when the user sent more counted frames than AGENTSITE_WS_RATE allows (this
        process's count, in memory: security/ratelimit.py TokenBuckets); the frame then does nothing."""
        user_id = self.scope["user"].pk
        wait = frame_allowed(live.frame_rate, user_id)
        if not wait:
            return
        message = f"{FRAMES_REASON} (AGENTSITE_WS_RATE); this one was not applied. Try again in {wait} s."
        await alimit_hit_record(
            user_id=user_id,
            limit="rate_limited",
            message=message,
            details={"setting": "AGENTSITE_WS_RATE", "frame": frame.type, "session_id": self.session_id},
            address=scope_address(self.scope),
        )
        raise RateExceeded(message, retry_after=wait, message_id=getattr(frame, "message_id", None))

    async def _send_error(self, exc: DomainError) -> None:
        await self.send_text(encode_event(error_frame(exc)))


def error_frame(exc: DomainError) -> dict[str, Any]:
    """A domain error as the `error` frame that goes to the socket whose frame caused it."""
    return {"type": "error", "data": exc.to_dict()}  # with `retry_after` (rate limited), `fields` (invalid)
