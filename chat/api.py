"""Chat REST API (PROTOCOL §2 "Chat sessions"): sessions, history, the queue, and SSE events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.contract import InputError
from agentsite.db import database_sync_to_async
from agentsite.errors import ApiError
from chat.cluster import OwnerUnavailable, RemoteError
from chat.events import encode_event
from chat.exceptions import ChatError
from chat.hub import call_from_sync, get_hub, message_submit
from chat.models import Session
from chat.serializers import (
    MAX_CONTENT,
    ConfirmationReplySerializer,
    MessageCreateSerializer,
    SessionCreateSerializer,
    SessionUpdateSerializer,
)
from chat.service import Cancel, ConfirmationReply, Remove, Steer
from chat.services import (
    message_list,
    session_close,
    session_create,
    session_get_for_user,
    session_get_open_for_user,
    session_list_for_user,
    session_rename,
)

SSE_KEEPALIVE_SECONDS = 15.0
SSE_CLOSED_CHECK_SECONDS = 1.0  # how soon an open stream notices that its session was deleted
_INPUT_ERROR_STATUS = {"not_found": 404, "already_resolved": 409, "invalid": 400, "owner_unavailable": 503}


def _api_error(exc: ChatError | InputError) -> ApiError:
    if isinstance(exc, ChatError):
        return ApiError(exc.status, exc.code, exc.message)
    return ApiError(_INPUT_ERROR_STATUS.get(exc.code, 409), exc.code, exc.message)


def _session(request: Request, session_id: str, *, open_only: bool = False) -> Session:
    getter = session_get_open_for_user if open_only else session_get_for_user
    try:
        return getter(user=request.user, session_id=session_id)
    except ChatError as exc:
        raise _api_error(exc) from None


def _snapshot(session: Session) -> dict[str, Any]:
    if not session.is_open:
        return {
            "running": False,
            "paused": False,
            "active_message_id": None,
            "pending": [],
            "confirmations": [],
        }
    try:
        snapshot, _ = call_from_sync(get_hub().snapshot, session.id)
    except (OwnerUnavailable, RemoteError):
        raise ApiError(
            503, "owner_unavailable", "The server process running this session does not answer."
        ) from None
    return snapshot


def _run(session_id: str, command: Any) -> Any:
    try:
        return call_from_sync(get_hub().dispatch, session_id, command)
    except InputError as exc:
        raise _api_error(exc) from None


class SessionListApi(generics.GenericAPIView):
    @extend_schema(operation_id="chat_sessions_list")
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(session_list_for_user(user=request.user))
        return self.get_paginated_response([session.to_dict() for session in page])

    def post(self, request: Request) -> Response:
        data = SessionCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            session = session_create(user=request.user, **data.validated_data)
        except ChatError as exc:
            raise _api_error(exc) from None
        return Response(session.to_dict(), status=200)


class SessionDetailApi(APIView):
    def get(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id)
        return Response({**session.to_dict(), "snapshot": _snapshot(session)})

    def patch(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id)
        data = SessionUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(session_rename(session=session, title=data.validated_data["title"]).to_dict())

    def delete(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id)
        if session.is_open:
            call_from_sync(get_hub().close_session, session.id)
            session_close(session=session)
        return Response({"session_id": session.id, "status": "closed"})


class MessageListApi(APIView):
    def get(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id)
        rows = list(message_list(session=session))
        return Response({"results": [row.to_dict() for row in rows], "next": None})

    def post(self, request: Request, session_id: str) -> Response:
        session = _session(request, session_id, open_only=True)
        data = MessageCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        if len(data.validated_data["content"]) > MAX_CONTENT:
            raise ApiError(400, "too_long", f"Message content is longer than {MAX_CONTENT} characters.")
        try:
            ack = call_from_sync(message_submit, session_id=session.id, **data.validated_data)
        except InputError as exc:
            raise _api_error(exc) from None
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
        data = ConfirmationReplySerializer(data=request.data)
        data.is_valid(raise_exception=True)
        reply = ConfirmationReply(
            confirmation_id=confirmation_id,
            approved=data.validated_data["approved"],
            option_id=data.validated_data.get("option_id"),
        )
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
        response = StreamingHttpResponse(_sse(session.id, since), content_type="text/event-stream")
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


async def _sse(session_id: str, since: int | None) -> AsyncIterator[str]:
    hub = get_hub()
    attachment = await hub.attach(session_id, since)
    snapshot, last_seq = attachment.snapshot, attachment.last_seq
    sent = last_seq
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
                if await _is_closed(session_id):  # deleted: end the stream as the socket is closed (4410)
                    yield _sse_frame(_closed_error(session_id))
                    return
                idle += SSE_CLOSED_CHECK_SECONDS
                if idle >= SSE_KEEPALIVE_SECONDS:
                    idle = 0.0
                    yield ": keep-alive\n\n"
                continue
            idle = 0.0
            seq = event.get("seq")
            if seq is not None:
                if seq <= sent:
                    continue  # already in the snapshot or the replay
                sent = seq
            yield _sse_frame(event)
    finally:
        await hub.detach(attachment)


async def _is_closed(session_id: str) -> bool:
    controller = get_hub().service.peek(session_id)
    if controller is not None:
        return controller.closed
    return await database_sync_to_async(Session.objects.filter(id=session_id, status="closed").exists)()
