"""Helpers for the queue tests: a cheap test user, the real runtime pointed at a fake LLM, polling.

The queue tests drive the real ASGI application (sockets and REST) with the real `DjangoRuntime`
talking over HTTP to `agentsite.dev.fake_llm.FakeLLMServer`; only the model endpoint is fake.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from accounts.services import api_key_create
from tests.support.ws import TIMEOUT

FAKE_MODEL = "fake-model"


def quick_user(username: str) -> Any:
    """A user without a password: hashing one costs about a second, which these tests do not need."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username=username, password=None)


def user_with_key(username: str) -> tuple[Any, str]:
    user = quick_user(username)
    _, secret = api_key_create(user=user, name="queue-tests")
    return user, secret


def use_fake_llm(base_url: str) -> None:
    """Make the fake LLM at `base_url` (ending in /v1) the site default provider and model."""
    from agents.models import Provider, SiteDefault

    provider = Provider.objects.create(
        id="fake",
        name="Fake",
        base_url=base_url,
        api_key="sk-fake-test-key",
        model_list=[FAKE_MODEL],
        default_model=FAKE_MODEL,
    )
    site = SiteDefault.load()
    site.provider = provider
    site.model = FAKE_MODEL
    site.save()


async def wait_until(
    condition: Callable[[], Any], *, within: float = TIMEOUT, interval: float = 0.01, what: str = ""
) -> Any:
    """Poll a (sync) condition until it is truthy and return its value; fail after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await asyncio.sleep(interval)


def user_texts(chat_request: dict[str, Any]) -> list[str]:
    """The user messages of one chat-completions request body, in order."""
    return [m.get("content") for m in chat_request.get("messages", []) if m.get("role") == "user"]


async def frames_until(
    communicator: WebsocketCommunicator,
    predicate: Callable[[dict[str, Any]], bool],
    *,
    within: float = TIMEOUT,
) -> list[dict[str, Any]]:
    """Every frame read up to and including the first one matching `predicate`."""
    seen: list[dict[str, Any]] = []
    while True:
        frame = await communicator.receive_json_from(timeout=within)
        seen.append(frame)
        if predicate(frame):
            return seen


def is_status(message_id: str, status: str) -> Callable[[dict[str, Any]], bool]:
    """Matches the `message_status` event of that message with that status."""

    def match(frame: dict[str, Any]) -> bool:
        return (
            frame.get("type") == "message_status"
            and frame.get("message_id") == message_id
            and frame.get("status") == status
        )

    return match


def is_result(message_id: str | None = None, status: str | None = None) -> Callable[[dict[str, Any]], bool]:
    """Matches a `result` event (of that message, with that status, when given)."""

    def match(frame: dict[str, Any]) -> bool:
        return (
            frame.get("type") == "result"
            and (message_id is None or frame.get("message_id") == message_id)
            and (status is None or frame.get("data", {}).get("status") == status)
        )

    return match


def is_type(kind: str) -> Callable[[dict[str, Any]], bool]:
    return lambda frame: frame.get("type") == kind


@asynccontextmanager
async def asgi_client(key: str) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client on the real ASGI app in this event loop, so REST and sockets share controllers."""
    from agentsite.asgi import application

    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(
        transport=transport,
        base_url="http://testserver/api/v1",
        headers={"Authorization": f"Bearer {key}"},
        timeout=TIMEOUT,
    ) as client:
        yield client


async def create_session(client: httpx.AsyncClient, **body: Any) -> str:
    response = await client.post("/chat/sessions", json=body)
    assert response.status_code == 200, response.text
    return str(response.json()["session_id"])


a_user_with_key = sync_to_async(user_with_key)
a_use_fake_llm = sync_to_async(use_fake_llm)
