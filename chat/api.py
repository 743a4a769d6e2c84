"""Chat REST API (docs/protocol.md §2 "Chat sessions"): sessions, history, the queue, and SSE events.

Views are thin: they parse input (chat/inputs.py), call services or the live sessions, and let domain
errors through to the one REST translation (agentsite/errors.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from django.db import InterfaceError, OperationalError
from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentsite.authentication import request_credential
from agentsite.credentials import Credential
from agentsite.errors import ApiError
from chat.inputs import ConfirmationReplyInput, parse, parse_message, query_flag
from chat.live import UNAVAILABLE, live_sessions
from chat.live.bridge import call_from_sync
from chat.live.commands import Cancel, Command, ConfirmationReply, Remove, Steer
from chat.live.events import encode_event
from chat.models import Session
from chat.serializers import SessionCreateSerializer, SessionUpdateSerializer
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
    return getter(user=request.user, session_id=session_id)


def _snapshot(session: Session) -> dict[str, Any]:
    if not session.is_open:
        return dict(CLOSED_SNAPSHOT)
    snapshot, _ = call_from_sync(live_sessions().snapshot, session.id)
    return snapshot


def _run(session_id: str, command: Command) -> Any:
    return call_from_sync(live_sessions().dispatch, session_id, command)


class SessionListApi(generics.GenericAPIView):
    @extend_schema(operation_id="chat_sessions_list")
    def get(self, request: Request) -> Response:
        params = request.query_params
        archived = query_flag(params.get("archived"), "archived")
        sessions = session_search_for_user(user=request.user, q=params.get("q", ""), archived=archived)
        page = self.paginate_queryset(sessions)
        return self.get_paginated_response([session.to_dict() for session in page])

    def post(self, request: Request) -> Response:
        data = SessionCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        session = session_create(user=request.user, **data.validated_data)
        return Response(session.to_dict(), status=200)


class SessionDetailApi(APIView):
    def get(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id)
        return Response({**session.to_dict(), "snapshot": _snapshot(session)})

    def patch(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id)
        data = SessionUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(session_update(session=session, **data.validated_data).to_dict())

    def delete(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id)
        hide = query_flag(request.query_params.get("hide"), "hide")
        if session.is_open:
            call_from_sync(live_sessions().close, session.id)
        session_delete(session=session, hide=hide)
        return Response({"session_id": session.id, "status": "closed"})


class MessageListApi(APIView):
    def get(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id)
        rows = list(message_list(session=session))
        return Response({"results": [row.to_dict() for row in rows], "next": None})

    def post(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id, open_only=True)
        message = parse_message(request.data)
        ack = call_from_sync(message_submit, session_id=session.id, **message.submit_options())
        return Response(ack, status=202)


class MessageSteerApi(APIView):
    def post(self, request: Request, session_id: str, message_id: str) -> Response:
        session = _session(request, session_id, open_only=True)
        return Response(_run(session.id, Steer(message_id=message_id)))


class MessageDetailApi(APIView):
    def delete(self, request: Request, session_id: str, message_id: str) -> Response:
        session = _session(request, session_id, open_only=True)
        return Response(_run(session.id, Remove(message_id=message_id)))


class CancelApi(APIView):
    def post(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id, open_only=True)
        _run(session.id, Cancel())
        return Response({"session_id": session.id, "status": "cancelled"})


class ConfirmationApi(APIView):
    def post(self, request: Request, session_id: str, confirmation_id: str) -> Response:
        session = _session(request, session_id, open_only=True)
        answer = parse(ConfirmationReplyInput, request.data)
        reply = ConfirmationReply(confirmation_id, answer.approved, answer.option_id)
        _run(session.id, reply)
        body: dict[str, Any] = {"confirmation_id": confirmation_id, "approved": reply.approved}
        if reply.option_id:
            body["option_id"] = reply.option_id
        return Response(body)


class EventStreamApi(APIView):
    """Server-Sent Events: the WebSocket's events, `id:` = seq, replay with ?since= or Last-Event-ID."""

    def get(self, request: Request, session_id: str) -> StreamingHttpResponse:
        # A closed session has no live events: refused like the socket refuses it (409 session_closed).
        session = _session(request, session_id, open_only=True)
        since_raw = request.query_params.get("since") or request.headers.get("Last-Event-ID")
        try:
            since = max(int(since_raw), 0) if since_raw is not None else None
        except ValueError:
            raise ApiError(400, "invalid", "since must be an integer event seq.") from None
        stream = _sse(session.id, since, request_credential(request))
        response = StreamingHttpResponse(stream, content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response


def _sse_frame(event: dict[str, Any]) -> str:
    data = encode_event(event)
    seq = event.get("seq")
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {event['type']}\ndata: {data}\n\n"


def _closed_error(session_id: str) -> dict[str, Any]:
    return {"type": "error", "data": {"code": "closed", "message": f"Session {session_id} is closed"}}


_ACCOUNT_ENDED: dict[str, Any] = {"type": "__account_ended__"}


class _Stream:
    """An SSE stream as the account watch sees it (agentsite/credentials.py)."""

    __slots__ = ("queue", "reason")

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.reason = ""

    def account_ended(self, reason: str) -> None:
        self.reason = reason
        self.queue.put_nowait(_ACCOUNT_ENDED)


async def _sse(session_id: str, since: int | None, credential: Credential) -> AsyncIterator[str]:
    live = live_sessions()
    attachment = await live.attach(session_id, since)
    snapshot, last_seq = attachment.snapshot, attachment.last_seq
    sent = attachment.position
    stream = _Stream(attachment.queue)
    live.accounts.add(stream, credential)
    try:
        yield _sse_frame(
            {"type": "connected", "session_id": session_id, "snapshot": snapshot, "last_seq": last_seq}
        )
        if attachment.backlog is None:
            yield _sse_frame({"type": "resync", "snapshot": snapshot, "last_seq": last_seq})
        else:
            for event in attachment.backlog:
                yield _sse_frame(event)
        idle = 0.0
        while True:
            try:
                event = await asyncio.wait_for(attachment.queue.get(), SSE_CLOSED_CHECK_SECONDS)
            except TimeoutError:
                try:
                    closed = await live.is_closed(session_id)
                except (OperationalError, InterfaceError):
                    closed = False  # the database is away: the live state (or its failure) says more
                if closed:  # deleted: end the stream as the socket is closed (4410)
                    yield _sse_frame(_closed_error(session_id))
                    return
                idle += SSE_CLOSED_CHECK_SECONDS
                if idle >= SSE_KEEPALIVE_SECONDS:
                    idle = 0.0
                    yield ": keep-alive\n\n"
                continue
            idle = 0.0
            if event is _ACCOUNT_ENDED:  # as a socket is closed with 4401
                yield _sse_frame(
                    {"type": "error", "data": {"code": "unauthorized", "message": stream.reason}}
                )
                return
            if event is UNAVAILABLE:  # as a socket is closed with 1012: reconnect with Last-Event-ID
                message = "The session cannot go on in this server process now; reconnect to resume."
                yield _sse_frame({"type": "error", "data": {"code": "unavailable", "message": message}})
                return
            seq = event.get("seq")
            if seq is not None:
                if seq <= sent:
                    continue  # already in the snapshot or the replay
                sent = seq
            yield _sse_frame(event)
    finally:
        live.accounts.discard(stream)
        await live.detach(attachment)
