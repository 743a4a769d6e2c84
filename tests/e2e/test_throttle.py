"""Lockout, rate limits and browser hardening on real servers (docs/protocol.md §6.2, §6.5; issue 15).

What was found: 40 wrong passwords in a row answered 200 each and then the right one logged in; 60 wrong
bearer keys answered 60 × 401 and no 429; a socket from `http://localhost:3000` was accepted by a server on
:8000; no Content-Security-Policy or Permissions-Policy header.

The servers run with the deployment's default limits, written out here (the suite's own are far higher).
The `scaled` tests run two processes on one Postgres and one Redis: the limits hold across them.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from tests.support.server import RunningServer, ServerEnv, serve, server_env

pytestmark = pytest.mark.services_rerun

DEFAULT_LIMITS = {
    "AGENTSITE_RATE_USER": "1200/min",
    "AGENTSITE_RATE_ANON": "120/min",
    "AGENTSITE_RATE_FAILED_KEYS": "30/min",
    "AGENTSITE_RATE_LOGIN": "5/15min",
    "AGENTSITE_LOGIN_ADDRESS_FAILURES": "30",
    "AGENTSITE_RATE_LOGIN_ADDRESS": "30/min",
}
ADMIN = {"username": "admin", "password": "a-long-Pass-phrase-42"}
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def post_form(http: httpx.Client, path: str, data: dict[str, str]) -> httpx.Response:
    """A browser's form post: the page first (for the CSRF token), then the form."""
    page = http.get(path)
    token = CSRF.search(page.text)
    assert token is not None, (page.status_code, page.headers, page.text[:500])
    return http.post(path, data={**data, "csrfmiddlewaretoken": token.group(1)})


def set_up_admin(server: RunningServer) -> httpx.Client:
    """The first account, made through /setup/ as a person would; returns its logged-in browser."""
    http = httpx.Client(base_url=server.base_url, timeout=20)
    response = post_form(http, "/setup/", {**ADMIN, "password_again": ADMIN["password"]})
    assert response.status_code == 302, response.text[:500]
    return http


def log_in(server: RunningServer, password: str, username: str = ADMIN["username"]) -> httpx.Response:
    with httpx.Client(base_url=server.base_url, timeout=20) as http:
        return post_form(http, "/login/", {"username": username, "password": password})


def assert_locked_out(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text[:300]
    assert 1 <= int(response.headers["Retry-After"]) <= 900
    assert "Too many failed attempts. Wait 15 minutes before you try again." in response.text


def assert_rate_limited(response: httpx.Response) -> None:
    assert response.status_code == 429, response.text
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    error = response.json()["error"]
    assert error["code"] == "rate_limited" and "Try again in" in error["message"], error


def wrong_keys(servers: list[RunningServer], count: int) -> list[int]:
    """`count` requests with wrong bearer keys, spread over the servers in turn; their statuses."""
    statuses = []
    for n in range(count):
        server = servers[n % len(servers)]
        response = httpx.get(
            f"{server.base_url}/api/v1/chat/sessions", headers={"Authorization": f"Bearer ask_wrong{n}"}
        )
        if response.status_code == 429:
            assert_rate_limited(response)
        statuses.append(response.status_code)
    return statuses


async def first_frame(url: str, **connect: Any) -> tuple[dict[str, Any], int | None]:
    """The socket's first frame and, after an `error`, the code it was closed with."""
    async with websockets.connect(url, open_timeout=10, **connect) as ws:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if frame["type"] != "error":
            return frame, None
        try:
            await asyncio.wait_for(ws.recv(), 10)
        except websockets.ConnectionClosed as closed:
            return frame, closed.rcvd.code if closed.rcvd else None
    return frame, None


# --- one server ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: Any) -> Iterator[tuple[ServerEnv, RunningServer, httpx.Client, str]]:
    """A server with the default limits, its admin logged in (a browser) and an API key of the admin."""
    with server_env(tmp_path_factory.mktemp("throttle"), **DEFAULT_LIMITS) as env, serve(env) as running:
        browser = set_up_admin(running)
        key = env.manage("create_api_key", "--user", ADMIN["username"]).strip()
        yield env, running, browser, key
        browser.close()


def test_five_wrong_passwords_lock_the_login_and_the_right_one_is_refused_until_the_cool_off(server) -> None:
    _, running, _, _ = server
    for _ in range(5):
        response = log_in(running, "wrong")
        assert response.status_code == 200 and "didn't match" in response.text

    assert_locked_out(log_in(running, ADMIN["password"]))
    assert_locked_out(log_in(running, "wrong"))


def test_pages_and_api_answers_carry_the_security_headers(server) -> None:
    _, running, browser, key = server
    answers = {
        "login page": httpx.get(f"{running.base_url}/login/"),
        "portal page": browser.get("/"),
        "API answer": httpx.get(
            f"{running.base_url}/api/v1/agents", headers={"Authorization": f"Bearer {key}"}
        ),
        "API error": httpx.get(f"{running.base_url}/api/v1/agents"),
        "static file": httpx.get(f"{running.base_url}/static/js/portal.js"),
    }
    for what, response in answers.items():
        assert response.status_code in (200, 401), what
        headers = response.headers
        policy = dict(
            (part.split()[0], part.split()[1:])
            for part in headers["Content-Security-Policy"].split(";")
            if part.strip()
        )
        assert "'unsafe-inline'" not in policy["script-src"], what
        assert policy["frame-ancestors"] == ["'none'"], what
        assert headers["X-Frame-Options"] == "DENY", what
        assert headers["X-Content-Type-Options"] == "nosniff", what
        assert headers["Referrer-Policy"] == "same-origin", what
        assert headers["Cross-Origin-Opener-Policy"] == "same-origin", what
        assert "camera=()" in headers["Permissions-Policy"], what


async def test_a_socket_origin_must_match_in_scheme_host_and_port(server) -> None:
    _, running, browser, key = server
    created = httpx.post(
        f"{running.base_url}/api/v1/chat/sessions", json={}, headers={"Authorization": f"Bearer {key}"}
    )
    session_id = created.json()["session_id"]
    url = f"{running.ws_url}/api/v1/chat/ws/{session_id}"
    cookie = {"Cookie": f"sessionid={browser.cookies['sessionid']}"}
    port = running.port

    frame, _ = await first_frame(url, origin=f"http://127.0.0.1:{port}", additional_headers=cookie)
    assert frame["type"] == "connected"
    for foreign in (
        "http://localhost:3000",
        f"http://127.0.0.1:{port + 1}",
        f"https://127.0.0.1:{port}",
        "http://127.0.0.1",
    ):
        with pytest.raises(InvalidStatus) as refused:
            await first_frame(url, origin=foreign, additional_headers=cookie)
        assert refused.value.response.status_code == 403, foreign
    frame, _ = await first_frame(f"{url}?api_key={key}")  # API clients send no Origin
    assert frame["type"] == "connected"


def test_the_api_docs_need_a_login(server) -> None:
    _, running, browser, key = server
    schema = httpx.get(f"{running.base_url}/api/v1/schema/")
    assert schema.status_code == 401 and schema.json()["error"]["code"] == "unauthorized"
    docs = httpx.get(f"{running.base_url}/api/v1/docs/")
    assert docs.status_code == 302 and docs.headers["Location"] == "/login/?next=/api/v1/docs/"

    assert (
        httpx.get(
            f"{running.base_url}/api/v1/schema/", headers={"Authorization": f"Bearer {key}"}
        ).status_code
        == 200
    )
    assert browser.get("/api/v1/docs/").status_code == 200


def test_the_api_docs_are_public_when_configured(tmp_path) -> None:
    with server_env(tmp_path, AGENTSITE_PUBLIC_API_DOCS="true") as env, serve(env) as running:
        assert httpx.get(f"{running.base_url}/api/v1/schema/").status_code == 200
        assert httpx.get(f"{running.base_url}/api/v1/docs/").status_code == 200


async def test_sixty_wrong_bearer_keys_get_429_with_retry_after_past_thirty(tmp_path) -> None:
    with server_env(tmp_path, **DEFAULT_LIMITS) as env, serve(env) as running:
        key = env.manage("create_api_key", "--user", "alice", "--create-user").strip()
        created = httpx.post(
            f"{running.base_url}/api/v1/chat/sessions", json={}, headers={"Authorization": f"Bearer {key}"}
        )
        session_id = created.json()["session_id"]

        assert wrong_keys([running], 60) == [401] * 30 + [429] * 30
        # The address is refused for the rest of the minute, the right key and sockets too.
        assert_rate_limited(
            httpx.get(f"{running.base_url}/api/v1/chat/sessions", headers={"Authorization": f"Bearer {key}"})
        )
        frame, code = await first_frame(f"{running.ws_url}/api/v1/chat/ws/{session_id}?api_key={key}")
        assert frame["type"] == "error" and frame["data"]["code"] == "rate_limited" and code == 4429


async def test_wrong_keys_on_sockets_count_too(tmp_path) -> None:
    with (
        server_env(tmp_path, **{**DEFAULT_LIMITS, "AGENTSITE_RATE_FAILED_KEYS": "5/min"}) as env,
        serve(env) as running,
    ):
        for _ in range(5):
            frame, code = await first_frame(f"{running.ws_url}/api/v1/chat/ws/any?api_key=ask_wrong")
            assert frame["data"]["code"] == "unauthorized" and code == 4401
        assert_rate_limited(
            httpx.get(f"{running.base_url}/api/v1/chat/sessions", headers={"Authorization": "Bearer ask_x"})
        )


# --- two processes sharing Postgres and Redis ---------------------------------------------------------


@pytest.fixture
def two_servers(tmp_path) -> Iterator[tuple[ServerEnv, list[RunningServer]]]:
    if not os.environ.get("DATABASE_URL", "").startswith(
        ("postgres://", "postgresql://")
    ) or not os.environ.get("REDIS_URL"):
        pytest.fail(
            "the scaled tests need DATABASE_URL=postgres://… and REDIS_URL (make test-services sets them)"
        )
    limits = {**DEFAULT_LIMITS, "AGENTSITE_RATE_USER": "20/min", "AGENTSITE_RATE_ANON": "10/min"}
    with server_env(tmp_path, **limits) as env, ExitStack() as stack:
        servers = [stack.enter_context(serve(env)) for _ in range(2)]
        yield env, servers


@pytest.mark.scaled
async def test_wrong_keys_are_counted_across_two_processes(two_servers) -> None:
    env, (a, b) = two_servers
    key = env.manage("create_api_key", "--user", "alice", "--create-user").strip()

    assert wrong_keys([a, b], 60) == [401] * 30 + [429] * 30
    for running in (a, b):
        assert_rate_limited(
            httpx.get(f"{running.base_url}/api/v1/agents", headers={"Authorization": f"Bearer {key}"})
        )
    frame, code = await first_frame(f"{b.ws_url}/api/v1/chat/ws/any?api_key={key}")
    assert frame["data"]["code"] == "rate_limited" and code == 4429


@pytest.mark.scaled
def test_user_and_address_rates_and_the_lockout_hold_across_two_processes(two_servers) -> None:
    env, (a, b) = two_servers
    set_up_admin(a).close()
    key = env.manage("create_api_key", "--user", ADMIN["username"]).strip()
    auth = {"Authorization": f"Bearer {key}"}

    statuses = [httpx.get(f"{s.base_url}/api/v1/agents", headers=auth).status_code for s in [a, b] * 11]
    assert statuses == [200] * 20 + [429] * 2
    assert_rate_limited(httpx.get(f"{a.base_url}/api/v1/agents", headers=auth))

    statuses = [httpx.get(f"{s.base_url}/api/v1/version").status_code for s in [a, b] * 6]
    assert statuses == [200] * 10 + [429] * 2

    for n in range(5):
        assert log_in([a, b][n % 2], "wrong").status_code == 200
    assert_locked_out(log_in(b, ADMIN["password"]))
    assert_locked_out(log_in(a, ADMIN["password"]))

    # Login attempts per address (30 a minute) are counted in Redis too: /setup/ and 7 logins so far.
    statuses = [log_in([a, b][n % 2], "wrong", username=f"nobody{n}").status_code for n in range(23)]
    assert statuses == [200] * 22 + [429]
    refused = log_in(a, ADMIN["password"])
    assert refused.status_code == 429 and "Too many login attempts from this address." in refused.text


@pytest.mark.scaled
async def test_a_ticket_made_on_one_process_opens_one_socket_on_any_other_once(two_servers) -> None:
    """docs/protocol.md §6.6: tickets live in Redis, hashed; the first handshake anywhere uses one up. A
    Bearer header on the upgrade request passes the proxy-less real server too."""
    env, (a, b) = two_servers
    key = env.manage("create_api_key", "--user", "alice", "--create-user").strip()
    auth = {"Authorization": f"Bearer {key}"}
    session = httpx.post(f"{a.base_url}/api/v1/chat/sessions", json={}, headers=auth)
    assert session.is_success, session.text
    url = f"/api/v1/chat/ws/{session.json()['session_id']}"
    ticket = httpx.post(f"{a.base_url}/api/v1/auth/ws-ticket", headers=auth).json()["ticket"]

    frame, _ = await first_frame(f"{b.ws_url}{url}?ticket={ticket}")
    assert frame["type"] == "connected"
    frame, code = await first_frame(f"{a.ws_url}{url}?ticket={ticket}")
    assert frame["data"]["code"] == "unauthorized" and code == 4401
    frame, _ = await first_frame(f"{a.ws_url}{url}", additional_headers=auth)
    assert frame["type"] == "connected"
