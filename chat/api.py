"""Chat REST API (docs/protocol.md §2 "Chat sessions"): sessions, history, the queue, and SSE events.

Views are thin: they parse input (chat/inputs.py), call services or the live sessions, and let domain
errors through to the one REST translation (agentsite/errors.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import request_credential, request_user
from accounts.credentials import Credential
from agentsite.negotiation import OwnBytesNegotiation
from agentsite.openapi import PAGE_PARAMETERS, errors, flag_parameter, page_of
from agentsite.pagination import CursorPage
from agentsite.query import query_flag
from audit.limits import limit_hit_record
from chat.exceptions import TooManySockets
from chat.inputs import ConfirmationReplyInput, MessageInput, parse, parse_message, parse_since
from chat.live import live_sessions
from chat.live.bridge import call_from_sync
from chat.live.commands import Cancel, Command, ConfirmationReply, Remove, Steer
from chat.live.events import encode_event
from chat.live.slots import Slot
from chat.live.subscriber import Subscriber
from chat.models import Message, Session
from chat.serializers import (
    SERVER_SENT_EVENT,
    CancelledSerializer,
    ConfirmationAnswerSerializer,
    MessageAckSerializer,
    MessageSerializer,
    SessionClosedSerializer,
    SessionCreateSerializer,
    SessionDetailSerializer,
    SessionSerializer,
    SessionUpdateSerializer,
)
from chat.services import (
    message_list,
    message_submit,
    session_create,
    session_delete,
    session_get_for_user,
    session_get_open_for_user,
    session_search_for_user,
    session_update,
)
from security.ratelimit import request_address

SSE_KEEPALIVE_SECONDS = 15.0
SSE_CLOSED_CHECK_SECONDS = 1.0  # how soon an open stream notices that its session was deleted
CLOSED_SNAPSHOT: dict[str, Any] = {
    "running": False,
    "paused": False,
    "active_message_id": None,
    "pending": [],
    "confirmations": [],
}


def _session(request: Request, session_id: str, *, open_only: bool = False) -> Session:
    getter = session_get_open_for_user if open_only else session_get_for_user
    return getter(user=request_user(request), session_id=session_id)


def _snapshot(session: Session) -> dict[str, Any]:
    if not session.is_open:
        return dict(CLOSED_SNAPSHOT)
    snapshot, _ = call_from_sync(live_sessions().snapshot, session.id)
    return snapshot


def _run(session_id: str, command: Command) -> Any:
    return call_from_sync(live_sessions().dispatch, session_id, command)


NOT_FOUND = "not_found: no such session (another user's answers the same)"
CLOSED = "session_closed: the session is closed and takes no new input"
OWNER_UNAVAILABLE = (
    "unavailable / owner_unavailable: the session's owner process cannot be reached; try again"
)
QUEUE_ERRORS = errors(
    {
        404: NOT_FOUND + "; not_found: no such pending message",
        409: CLOSED
        + "; no_longer_pending: the message is not pending (started, steered, removed or unknown)",
        503: OWNER_UNAVAILABLE,
    }
)


class MessagePage(CursorPage):
    ordering = ("entered_at", "id")  # the conversation in the order the model saw it


class SessionListApi(generics.GenericAPIView[Session]):
    @extend_schema(
        operation_id="chat_sessions_list",
        parameters=[
            OpenApiParameter("q", str, description="Only sessions whose title or a message contains it"),
            flag_parameter("archived", "Only archived sessions (by default they are left out)"),
            *PAGE_PARAMETERS,
        ],
        responses=page_of(SessionSerializer),
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        archived = query_flag(params.get("archived"), "archived")
        sessions = session_search_for_user(
            user=request_user(request), q=params.get("q", ""), archived=archived
        )
        page = self.paginate_queryset(sessions)
        return self.get_paginated_response([session.to_dict() for session in page or []])

    @extend_schema(
        operation_id="chat_sessions_create",
        examples=[
            OpenApiExample(
                "A titled chat", {"agent_name": "default", "title": "Release notes"}, request_only=True
            )
        ],
        request=SessionCreateSerializer,
        responses={
            200: SessionSerializer,
            **errors(
                {
                    400: "invalid; limit_reached: AGENTSITE_USER_MAX_SESSIONS open sessions already",
                    404: "not_found: no such agent",
                    409: "session_exists: the session id is in use",
                }
            ),
        },
    )
    def post(self, request: Request) -> Response:
        data = SessionCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        session = session_create(user=request_user(request), **data.validated_data)
        return Response(session.to_dict(), status=200)


class SessionDetailApi(APIView):
    @extend_schema(
        operation_id="chat_sessions_retrieve",
        responses={200: SessionDetailSerializer, **errors({404: NOT_FOUND, 503: OWNER_UNAVAILABLE})},
    )
    def get(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id)
        return Response({**session.to_dict(), "snapshot": _snapshot(session)})

    @extend_schema(
        operation_id="chat_sessions_update",
        examples=[
            OpenApiExample(
                "Rename and archive", {"title": "Release notes, v2", "archived": True}, request_only=True
            )
        ],
        request=SessionUpdateSerializer,
        responses={200: SessionSerializer, **errors({404: NOT_FOUND})},
    )
    def patch(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id)
        data = SessionUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(session_update(session=session, **data.validated_data).to_dict())

    @extend_schema(
        operation_id="chat_sessions_close",
        parameters=[flag_parameter("hide", "Also remove it from every list (it stays readable by id)")],
        responses={200: SessionClosedSerializer, **errors({404: NOT_FOUND, 503: OWNER_UNAVAILABLE})},
    )
    def delete(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id)
        hide = query_flag(request.query_params.get("hide"), "hide")
        if session.is_open:
            call_from_sync(live_sessions().close, session.id)
        session_delete(session=session, hide=hide)
        return Response({"session_id": session.id, "status": "closed"})


class MessageListApi(generics.GenericAPIView[Message]):
    pagination_class = MessagePage

    @extend_schema(
        operation_id="chat_messages_list",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(MessageSerializer), **errors({404: NOT_FOUND})},
    )
    def get(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id)
        page = self.paginate_queryset(message_list(session=session))
        return self.get_paginated_response([row.to_dict() for row in page or []])

    @extend_schema(
        operation_id="chat_messages_create",
        examples=[
            OpenApiExample(
                "A message with its own id",
                {"content": "List the files in my workspace.", "message_id": "msg-0001"},
                request_only=True,
            ),
            OpenApiExample(
                "Steer it into the running turn",
                {"content": "Only the Markdown files, please.", "steer": True, "approval_mode": "read_only"},
                request_only=True,
            ),
        ],
        request=MessageInput,
        responses={
            202: MessageAckSerializer,
            **errors(
                {
                    400: "invalid; too_long: content over 100,000 characters; model_not_allowed",
                    404: NOT_FOUND,
                    409: CLOSED + "; duplicate_message_id: the session has a message with that id",
                    429: "queue_full: AGENTSITE_SESSION_MAX_PENDING or AGENTSITE_USER_MAX_PENDING pending"
                    " messages already; nothing stored",
                    503: OWNER_UNAVAILABLE,
                }
            ),
        },
    )
    def post(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id, open_only=True)
        message = parse_message(request.data)
        ack = call_from_sync(message_submit, session_id=session.id, **message.submit_options())
        return Response(ack, status=202)


class MessageSteerApi(APIView):
    @extend_schema(
        operation_id="chat_messages_steer",
        request=None,
        responses={200: MessageAckSerializer, **QUEUE_ERRORS},
    )
    def post(self, request: Request, session_id: str, message_id: str) -> Response:
        session = _session(request, session_id, open_only=True)
        return Response(_run(session.id, Steer(message_id=message_id)))


class MessageDetailApi(APIView):
    @extend_schema(operation_id="chat_messages_remove", responses={200: MessageAckSerializer, **QUEUE_ERRORS})
    def delete(self, request: Request, session_id: str, message_id: str) -> Response:
        session = _session(request, session_id, open_only=True)
        return Response(_run(session.id, Remove(message_id=message_id)))


class CancelApi(APIView):
    @extend_schema(
        operation_id="chat_sessions_cancel",
        request=None,
        responses={200: CancelledSerializer, **errors({404: NOT_FOUND, 409: CLOSED, 503: OWNER_UNAVAILABLE})},
    )
    def post(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id, open_only=True)
        _run(session.id, Cancel())
        return Response({"session_id": session.id, "status": "cancelled"})


class ConfirmationApi(APIView):
    @extend_schema(
        operation_id="chat_confirmations_reply",
        examples=[OpenApiExample("Approve", {"approved": True}, request_only=True)],
        request=ConfirmationReplyInput,
        responses={
            200: ConfirmationAnswerSerializer,
            **errors(
                {
                    404: NOT_FOUND + "; not_found: no such confirmation",
                    409: CLOSED + "; already_resolved: the confirmation was answered already",
                    503: OWNER_UNAVAILABLE,
                }
            ),
        },
    )
    def post(self, request: Request, session_id: str, confirmation_id: str) -> Response:
        session = _session(request, session_id, open_only=True)
        answer = parse(ConfirmationReplyInput, request.data)
        reply = ConfirmationReply(confirmation_id, answer.approved, answer.option_id)
        _run(session.id, reply)
        body: dict[str, Any] = {"confirmation_id": confirmation_id, "approved": reply.approved}
        if reply.option_id:
            body["option_id"] = reply.option_id
        return Response(body)


SSE_DESCRIPTION = """\
Server-Sent Events: the session's events as the WebSocket sends them (docs/protocol.md §3.3), each as
`id: <seq>`, `event: <type>`, `data: <json>`. It opens with `connected` (snapshot and `last_seq`), then
the replay of the events after `since` / `Last-Event-ID` (or `resync` when they are no longer kept), then
live events; a comment line every 15 s keeps proxies from closing it. Deleting the session ends the
stream with an `error` event (`closed`); a session that cannot go on in this process ends it with an
`error` event (`unavailable`): reconnect with `Last-Event-ID`."""


class EventStreamApi(APIView):
    """Server-Sent Events: the WebSocket's events, `id:` = seq, replay with ?since= or Last-Event-ID."""

    content_negotiation_class = OwnBytesNegotiation

    @extend_schema(
        operation_id="chat_events_stream",
        description=SSE_DESCRIPTION,
        parameters=[
            OpenApiParameter(
                "since",
                int,
                description="Replay the events after this seq (below 0: from the start); `Last-Event-ID`, as "
                "EventSource sends it, does the same",
            )
        ],
        responses={
            (200, "text/event-stream"): OpenApiResponse(SERVER_SENT_EVENT, description="An endless stream"),
            **errors(
                {
                    400: "invalid: since (or Last-Event-ID) is not an integer",
                    404: NOT_FOUND,
                    409: "session_closed: a closed session has no live events",
                    429: "too_many_sockets: AGENTSITE_USER_MAX_SOCKETS sockets and streams open already",
                    503: OWNER_UNAVAILABLE,
                }
            ),
        },
    )
    def get(self, request: Request, session_id: str) -> StreamingHttpResponse:
        # A closed session has no live events: refused like the socket refuses it (409 session_closed).
        session = _session(request, session_id, open_only=True)
        since_raw = request.query_params.get("since")  # `?since=` is no seq: 400, as any other non-number
        if since_raw is None:
            since_raw = request.headers.get("Last-Event-ID") or None
        since = parse_since(since_raw)  # read as the socket reads it
        slot, loop = call_from_sync(_stream_slot, request_user(request).pk)
        if slot is None:
            refusal = TooManySockets(settings.AGENTSITE_USER_MAX_SOCKETS)
            details = {"setting": "AGENTSITE_USER_MAX_SOCKETS", "max": refusal.limit, "socket": "sse"}
            limit_hit_record(
                user_id=request_user(request).pk,
                limit=refusal.code,
                message=refusal.message,
                details=details,
                address=request_address(request),
            )
            raise refusal
        stream = _StreamBody(_sse(session.id, since, request_credential(request)), slot, loop)
        response = StreamingHttpResponse(stream, content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response


async def _stream_slot(user_id: int) -> tuple[Slot | None, asyncio.AbstractEventLoop]:
    """One of the user's AGENTSITE_USER_MAX_SOCKETS for an SSE stream, and the loop it is given back on."""
    return await live_sessions().open_connection(user_id), asyncio.get_running_loop()


class _StreamBody:
    """An SSE response's body: its events, and its slot given back when the response is closed (always,
    also when the client left before the first event: the handler closes every response it sent)."""

    def __init__(self, events: AsyncIterator[str], slot: Slot, loop: asyncio.AbstractEventLoop) -> None:
        self._events = events
        self._slot: Slot | None = slot
        self._loop = loop

    def __aiter__(self) -> AsyncIterator[str]:
        return self._events

    def close(self) -> None:
        """Called by the handler in a thread of its own: the slot goes back on the event loop."""
        slot, self._slot = self._slot, None
        if slot is not None:
            with contextlib.suppress(RuntimeError):  # the loop is gone (shut down): so is the count
                self._loop.call_soon_threadsafe(slot.release)


def _sse_frame(event: dict[str, Any]) -> str:
    data = encode_event(event)
    seq = event.get("seq")
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {event['type']}\ndata: {data}\n\n"


def _error(code: str, message: str) -> str:
    return _sse_frame({"type": "error", "data": {"code": code, "message": message}})


# How a stream ends, as the socket would be closed: 1012 (reconnect with Last-Event-ID), 4410, 4401.
_UNAVAILABLE_MESSAGE = "The session cannot go on in this server process now; reconnect to resume."
SSE_SLICE = 64  # events taken in one wake-up, sent as one chunk


async def _sse(session_id: str, since: int | None, credential: Credential) -> AsyncIterator[str]:
    live = live_sessions()
    subscriber = await Subscriber.attach(live, session_id, since)
    live.accounts.add(subscriber, credential)
    try:
        yield "".join(_sse_frame(event) for event in subscriber.opening())
        idle = 0.0
        while True:
            taken = await subscriber.take_within(SSE_CLOSED_CHECK_SECONDS, _sse_frame, SSE_SLICE)
            if taken is None:
                try:
                    closed = await live.is_closed(session_id)
                except (OperationalError, InterfaceError):
                    closed = False  # the database is away: the live state (or its failure) says more
                if closed:  # deleted: end the stream as the socket is closed (4410)
                    yield _error("closed", f"Session {session_id} is closed")
                    return
                idle += SSE_CLOSED_CHECK_SECONDS
                if idle >= SSE_KEEPALIVE_SECONDS:
                    idle = 0.0
                    yield ": keep-alive\n\n"
                continue
            idle = 0.0
            texts, end = taken
            if texts:
                yield "".join(texts)
            if end == "unauthorized":
                yield _error("unauthorized", subscriber.reason)
                return
            if end is not None:
                yield _error(
                    end, _UNAVAILABLE_MESSAGE if end == "unavailable" else f"Session {session_id} is closed"
                )
                return
    finally:
        live.accounts.discard(subscriber)
        await subscriber.detach()
