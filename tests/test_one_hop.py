"""HTTP requests run Django's middleware chain and the view in one hand-over to the request's thread
(agentsite/internals.py trick 4, issue 18), with the semantics of every browser request unchanged: a
session cookie still needs its CSRF token, a key does not, security headers are still set."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from asgiref import sync as asgiref_sync
from django.conf import settings

from agentsite.asgi import django_asgi_app
from agentsite.internals import OneHopASGIHandler
from tests import factories
from tests.support.stack import speed_layer_only

pytestmark = pytest.mark.django_db(transaction=True)

SESSIONS = "/api/v1/chat/sessions"


def client(app: Any = django_asgi_app, **kwargs: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost", **kwargs)


@pytest.fixture
def hand_overs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the sync functions handed to a thread (sync_to_async), in order."""
    calls: list[str] = []
    real = asgiref_sync.SyncToAsync.__call__

    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(asgiref_sync.SyncToAsync, "__call__", counted)
    return calls


@speed_layer_only
async def test_the_chain_and_the_view_of_a_request_take_one_hand_over(hand_overs: list[str]) -> None:
    assert isinstance(django_asgi_app, OneHopASGIHandler)
    user = await asgiref_sync.sync_to_async(factories.user)("alice")
    key = await asgiref_sync.sync_to_async(factories.api_key)(user)
    hand_overs.clear()
    async with client() as http:
        response = await http.post(SESSIONS, json={}, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200, response.text
    # request_started's receivers, the chain with the view, the response's close (request_finished): one
    assert hand_overs == ["OneHopASGIHandler._serve"], hand_overs
    ours = len(hand_overs)
    # Django's own handler, for comparison: hand-overs for the middlewares' steps in async mode (how many
    # depends on where the sync-only middlewares sit in the chain)
    from django.core.handlers.asgi import ASGIHandler

    hand_overs.clear()
    async with client(ASGIHandler()) as http:
        await http.post(SESSIONS, json={}, headers={"Authorization": f"Bearer {key}"})
    assert len(hand_overs) > ours, hand_overs
    assert response.headers["X-Frame-Options"] == "DENY"  # the page middlewares ran
    assert response.headers["X-Content-Type-Options"] == "nosniff"


async def test_a_browser_session_still_needs_its_csrf_token_and_a_key_does_not() -> None:
    def login() -> tuple[str, str]:
        from django.test import Client

        user = factories.user("bob")
        browser = Client()
        browser.force_login(user)
        return browser.cookies[settings.SESSION_COOKIE_NAME].value, factories.api_key(user)

    session_key, key = await asgiref_sync.sync_to_async(login)()
    cookies = {settings.SESSION_COOKIE_NAME: session_key, settings.CSRF_COOKIE_NAME: "a" * 32}
    origin = {"Origin": "http://localhost", "Referer": "http://localhost/"}
    async with client(cookies=cookies) as http:
        refused = await http.post(SESSIONS, json={}, headers=origin)
        allowed = await http.post(SESSIONS, json={}, headers={**origin, "X-CSRFToken": "a" * 32})
    async with client() as http:
        by_key = await http.post(SESSIONS, json={}, headers={"Authorization": f"Bearer {key}"})
    assert refused.status_code == 403 and "CSRF" in refused.text
    assert allowed.status_code == 200, allowed.text
    assert by_key.status_code == 200, by_key.text


@speed_layer_only
async def test_at_most_the_given_number_of_requests_run_their_view_at_once() -> None:
    import threading
    import time

    from django.http import HttpResponse

    handler = OneHopASGIHandler(threads=2)
    running, most = 0, 0
    lock = threading.Lock()

    def view(request: Any) -> HttpResponse:  # the chain and view of one request, in its thread
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return HttpResponse("ok")

    handler.get_response = view  # type: ignore[method-assign]
    async with client(handler) as http:
        responses = await asyncio.gather(*(http.get("/healthz") for _ in range(6)))
    assert [r.status_code for r in responses] == [200] * 6
    assert most == 2


@speed_layer_only
async def test_a_request_starts_and_finishes_in_the_thread_of_its_view_and_threads_are_reused() -> None:
    """request_finished (Django's connection clean-up) runs where the view's connection lives, and the
    next request does not need a new thread (nor a new database connection with CONN_MAX_AGE > 0)."""
    import threading

    from django.core import signals
    from django.http import HttpResponse

    handler = OneHopASGIHandler(threads=1)
    seen: list[tuple[str, int]] = []

    def view(request: Any) -> HttpResponse:
        seen.append(("view", threading.get_ident()))
        return HttpResponse("ok")

    def started(**kwargs: Any) -> None:
        seen.append(("started", threading.get_ident()))

    def finished(**kwargs: Any) -> None:
        seen.append(("finished", threading.get_ident()))

    handler.get_response = view  # type: ignore[method-assign]
    signals.request_started.connect(started)
    signals.request_finished.connect(finished)
    try:
        async with client(handler) as http:
            assert (await http.get("/healthz")).status_code == 200
            assert (await http.get("/healthz")).status_code == 200
    finally:
        signals.request_started.disconnect(started)
        signals.request_finished.disconnect(finished)
    assert [name for name, _ in seen] == ["started", "view", "finished"] * 2
    assert len({thread for _, thread in seen}) == 1
    assert threading.get_ident() not in {thread for _, thread in seen}


@speed_layer_only
async def test_a_streamed_response_is_sent_whole_and_closed_after_it_is_sent() -> None:
    from django.http import StreamingHttpResponse

    handler = OneHopASGIHandler(threads=2)
    closed: list[bool] = []

    async def parts() -> Any:
        for part in (b"one ", b"two"):
            yield part

    def view(request: Any) -> StreamingHttpResponse:
        response = StreamingHttpResponse(parts())
        response._resource_closers.append(lambda: closed.append(True))
        return response

    handler.get_response = view  # type: ignore[method-assign]
    async with client(handler) as http:
        response = await http.get("/stream")
    assert response.status_code == 200 and response.content == b"one two"
    assert closed == [True]
