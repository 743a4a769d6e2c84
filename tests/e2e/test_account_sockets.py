"""Sockets follow the account, and keys, on real server processes (docs/protocol.md §6.2, issue 15).

What was found: a deactivated user's open key socket and cookie socket both ran a new message to `result`;
logging out closed nothing; a key could mint keys, so revoking a leaked key left the key it made working;
keys never expired. Now deactivation, deletion, revocation, expiry and logout close the sockets they
concern with 4401 within 2 s, whichever process or tool made the change (the admin, REST, `manage.py
shell`, another server process), and a key cannot create keys.

One process: SQLite and the in-memory layer here, Postgres + Redis in the services rerun. Two processes
(Postgres + Redis): the `scaled` test at the end.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import re
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import websockets

from tests.support.server import RunningServer, ServerEnv, serve, server_env
from tests.support.sse import sse_events

pytestmark = [pytest.mark.services_rerun, pytest.mark.timeout(300)]  # a loaded machine starts servers slowly

WITHIN = 2.0  # docs/protocol.md §6.2
PASSWORD = "a long enough password 7"
KEYS = "/api/v1/auth/keys"

# The password is hashed once for all (the server's hasher is the real, slow one).
NEW_USERS = """
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from accounts.services import api_key_create
hashed = make_password({password!r})
for name, staff in {users!r}:
    user = get_user_model().objects.create_user(name, is_staff=staff, is_superuser=staff)
    user.password = hashed
    user.save(update_fields=["password"])
    print(name, user.pk, api_key_create(user=user, name="first")[1])
"""


@dataclass
class Person:
    name: str
    pk: int
    key: str


def new_users(env: ServerEnv, *names: str, staff: tuple[str, ...] = ()) -> dict[str, Person]:
    """Users with a password and one key (named `first`) each, made in one `manage.py shell`."""
    users = [(name, name in staff) for name in names]
    output = env.manage("shell", "-c", NEW_USERS.format(users=users, password=PASSWORD))
    rows = [line.split() for line in output.splitlines()[-len(names) :]]
    return {name: Person(name, int(pk), key) for name, pk, key in rows}


@pytest.fixture(scope="module")
def env(tmp_path_factory: Any) -> Iterator[ServerEnv]:
    with server_env(tmp_path_factory.mktemp("accounts")) as env:
        yield env


@pytest.fixture(scope="module")
def people(env: ServerEnv) -> dict[str, Person]:
    names = (
        "alice",
        "staff",
        "bob-save",
        "bob-update",
        "dora",
        "carol",
        "erin",
        "fred",
        "gina",
        "hana",
        "ivan",
        "jack",
    )
    return new_users(env, *names, staff=("staff",))


@pytest.fixture(scope="module")
def server(env: ServerEnv) -> Iterator[RunningServer]:
    with serve(env) as server:
        yield server


@pytest.fixture(autouse=True)
def fresh_live_sessions() -> None:
    """The servers are other processes: no in-process live sessions to reset."""


# --- clients ---------------------------------------------------------------------------------------------


async def log_in(server: RunningServer, person: Person, *, admin: bool = False) -> httpx.AsyncClient:
    """A browser's session: the portal's (or the admin's) login form, with its CSRF token."""
    http = httpx.AsyncClient(base_url=server.base_url, timeout=20)
    path = "/admin/login/" if admin else "/login/"
    assert (await http.get(path)).status_code == 200
    form = {"username": person.name, "password": PASSWORD, "csrfmiddlewaretoken": http.cookies["csrftoken"]}
    response = await http.post(path, data=form)
    assert response.status_code == 302, response.text
    assert "sessionid" in http.cookies
    return http


async def as_browser(http: httpx.AsyncClient, method: str, path: str, body: Any = None) -> httpx.Response:
    headers = {"X-CSRFToken": http.cookies["csrftoken"]}
    return await http.request(method, path, json=body, headers=headers)


def by_key(server: RunningServer, person: Person, key: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key or person.key}"}
    return httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=20)


async def new_session(server: RunningServer, person: Person) -> str:
    async with by_key(server, person) as http:
        response = await http.post("/api/v1/chat/sessions", json={})
        assert response.status_code == 200, response.text
        return str(response.json()["session_id"])


async def key_socket(server: RunningServer, session_id: str, key: str) -> Any:
    ws = await websockets.connect(f"{server.ws_url}/api/v1/chat/ws/{session_id}?api_key={key}")
    assert json.loads(await ws.recv())["type"] == "connected"
    return ws


async def refused_socket(server: RunningServer, session_id: str, key: str) -> str:
    """A new socket with this key is refused at once (`unauthorized`, 4401); what it was told."""
    async with websockets.connect(f"{server.ws_url}/api/v1/chat/ws/{session_id}?api_key={key}") as ws:
        return await closed_4401(ws)


async def cookie_socket(server: RunningServer, session_id: str, browser: httpx.AsyncClient) -> Any:
    headers = {"Cookie": f"sessionid={browser.cookies['sessionid']}", "Origin": server.base_url}
    ws = await websockets.connect(f"{server.ws_url}/api/v1/chat/ws/{session_id}", additional_headers=headers)
    assert json.loads(await ws.recv())["type"] == "connected"
    return ws


async def closed_4401(ws: Any) -> str:
    """The socket is told `unauthorized` and closed with 4401; the message it was told."""
    frame = json.loads(await ws.recv())
    assert frame["type"] == "error" and frame["data"]["code"] == "unauthorized", frame
    with pytest.raises(websockets.ConnectionClosed) as closed:
        await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
    return str(frame["data"]["message"])


async def all_closed_4401(*sockets: Any, since: float) -> list[str]:
    """Every socket closed with 4401 within WITHIN seconds of `since` (when the change was made)."""
    async with asyncio.timeout(WITHIN + 3):  # fail with the time it took rather than hang
        messages = await asyncio.gather(*(closed_4401(ws) for ws in sockets))
    took = time.monotonic() - since
    assert took < WITHIN, f"the sockets closed {took:.2f} s after the change"
    return messages


async def still_open(ws: Any) -> None:
    await ws.send(json.dumps({"type": "ping"}))
    async with asyncio.timeout(WITHIN):
        assert json.loads(await ws.recv()) == {"type": "pong"}


async def admin_deactivates(admin: httpx.AsyncClient, person: Person) -> None:
    """Untick 'Active' on the user's page in Django's admin and save, as a staff member would."""
    path = f"/admin/auth/user/{person.pk}/change/"
    page = (await admin.get(path)).text
    form = {
        "csrfmiddlewaretoken": admin.cookies["csrftoken"],
        "username": person.name,
        "_save": "Save",
    }
    for part in ("date_joined_0", "date_joined_1"):
        found = re.search(rf'name="{part}" value="([^"]*)"', page)
        assert found, f"{part} not on the admin's user page"
        form[part] = found.group(1)
    response = await admin.post(path, data=form)  # is_active left out: unticked
    assert response.status_code == 302, re.findall(r'class="errorlist[^>]*>(.*?)</ul>', response.text)


@pytest.fixture
async def browsers() -> AsyncIterator[list[httpx.AsyncClient]]:
    """Clients a test opens, closed at its end."""
    opened: list[httpx.AsyncClient] = []
    yield opened
    for http in opened:
        await http.aclose()


# --- one process ---------------------------------------------------------------------------------------


async def test_deactivating_a_user_in_the_admin_closes_their_key_and_cookie_sockets(people, server, browsers):
    alice, staff = people["alice"], people["staff"]
    session_id = await new_session(server, alice)
    browsers.append(browser := await log_in(server, alice))
    browsers.append(admin := await log_in(server, staff, admin=True))
    on_key = await key_socket(server, session_id, alice.key)
    on_cookie = await cookie_socket(server, session_id, browser)
    staffs_socket = await key_socket(server, await new_session(server, staff), staff.key)

    await admin_deactivates(admin, alice)
    messages = await all_closed_4401(on_key, on_cookie, since=time.monotonic())

    assert all("deactivated" in message for message in messages)
    await still_open(staffs_socket)
    async with by_key(server, alice) as http:
        assert (await http.get("/api/v1/chat/sessions")).status_code == 401
    assert (await browser.get("/api/v1/chat/sessions")).status_code == 401
    assert "api_key" in await refused_socket(server, session_id, alice.key)  # and a new socket is refused
    await staffs_socket.close()


@pytest.mark.parametrize("how", ["save", "update"])
async def test_a_user_deactivated_from_manage_py_shell_loses_their_sockets(
    env, people, server, browsers, how
):
    """Another process, maybe without a channel layer server processes hear (SQLite: the in-memory layer);
    `update` sends no signal at all: the servers' sweep finds both."""
    bob = people[f"bob-{how}"]
    session_id = await new_session(server, bob)
    browsers.append(browser := await log_in(server, bob))
    on_key = await key_socket(server, session_id, bob.key)
    on_cookie = await cookie_socket(server, session_id, browser)
    change = {
        "save": f"u = User.objects.get(pk={bob.pk}); u.is_active = False; u.save()",
        "update": f"User.objects.filter(pk={bob.pk}).update(is_active=False)",
    }[how]

    env.manage("shell", "-c", f"from django.contrib.auth.models import User; {change}")
    await all_closed_4401(on_key, on_cookie, since=time.monotonic())


async def test_deleting_a_user_closes_their_sockets(env, people, server, browsers):
    dora = people["dora"]
    session_id = await new_session(server, dora)
    browsers.append(browser := await log_in(server, dora))
    on_key = await key_socket(server, session_id, dora.key)
    on_cookie = await cookie_socket(server, session_id, browser)

    env.manage(
        "shell", "-c", f"from django.contrib.auth.models import User; User.objects.get(pk={dora.pk}).delete()"
    )
    messages = await all_closed_4401(on_key, on_cookie, since=time.monotonic())

    assert all("deleted" in message for message in messages)


async def test_logging_out_closes_the_sockets_of_that_login_only(people, server, browsers):
    carol = people["carol"]
    session_id = await new_session(server, carol)
    browsers.append(leaving := await log_in(server, carol))
    browsers.append(staying := await log_in(server, carol))  # another browser
    on_leaving = await cookie_socket(server, session_id, leaving)
    on_staying = await cookie_socket(server, session_id, staying)
    on_key = await key_socket(server, session_id, carol.key)

    logout = await leaving.post("/logout/", data={"csrfmiddlewaretoken": leaving.cookies["csrftoken"]})
    assert logout.status_code == 302
    (message,) = await all_closed_4401(on_leaving, since=time.monotonic())

    assert "logged out" in message
    await still_open(on_staying)
    await still_open(on_key)
    for ws in (on_staying, on_key):
        await ws.close()


async def test_a_password_changed_elsewhere_closes_the_sockets_of_the_old_logins_not_the_keys(
    env, people, server, browsers
):
    """As Django's own check ends the old logins' requests (the session's password hash no longer matches),
    the sweep ends their sockets; keys do not follow the password."""
    jack = people["jack"]
    session_id = await new_session(server, jack)
    browsers.append(browser := await log_in(server, jack))
    on_cookie = await cookie_socket(server, session_id, browser)
    on_key = await key_socket(server, session_id, jack.key)

    change = f"u = User.objects.get(pk={jack.pk}); u.set_password('another long password 8'); u.save()"
    env.manage("shell", "-c", f"from django.contrib.auth.models import User; {change}")
    (message,) = await all_closed_4401(on_cookie, since=time.monotonic())

    assert "password changed" in message
    assert (await browser.get("/api/v1/chat/sessions")).status_code == 401
    await still_open(on_key)
    await on_key.close()


async def test_revoking_a_key_closes_its_sockets_and_no_other(people, server, browsers):
    erin = people["erin"]
    session_id = await new_session(server, erin)
    browsers.append(browser := await log_in(server, erin))
    second = (await as_browser(browser, "POST", KEYS, {"name": "second"})).json()
    revoked_socket = await key_socket(server, session_id, erin.key)
    other_socket = await key_socket(server, session_id, second["key"])
    first_id = next(k["id"] for k in (await browser.get(KEYS)).json()["results"] if k["name"] == "first")

    assert (await as_browser(browser, "DELETE", f"{KEYS}/{first_id}")).status_code == 200
    (message,) = await all_closed_4401(revoked_socket, since=time.monotonic())

    assert message == "The api_key was revoked."
    await still_open(other_socket)
    await other_socket.close()


async def test_an_sse_stream_ends_like_a_socket(people, server, browsers):
    ivan = people["ivan"]
    session_id = await new_session(server, ivan)
    browsers.append(browser := await log_in(server, ivan))
    path = f"/api/v1/chat/sessions/{session_id}/events"
    async with by_key(server, ivan) as http, http.stream("GET", path) as response:
        events = sse_events(response)
        assert (await anext(events)).event == "connected"
        key_id = (await browser.get(KEYS)).json()["results"][0]["id"]
        assert (await as_browser(browser, "DELETE", f"{KEYS}/{key_id}")).status_code == 200
        since = time.monotonic()
        async with asyncio.timeout(WITHIN):
            ended = await anext(events)
            assert ended.event == "error" and ended.data["data"]["code"] == "unauthorized"
            assert [event async for event in events] == []  # and the stream ends
        assert time.monotonic() - since < WITHIN


async def test_an_expired_key_is_refused_and_its_socket_closes(people, server, browsers):
    fred = people["fred"]
    session_id = await new_session(server, fred)
    browsers.append(browser := await log_in(server, fred))
    expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=3)
    created = await as_browser(browser, "POST", KEYS, {"name": "brief", "expires_at": expires.isoformat()})
    assert created.status_code == 201, created.text
    brief = created.json()["key"]
    ws = await key_socket(server, session_id, brief)
    await still_open(ws)

    await asyncio.sleep(max(0.0, (expires - dt.datetime.now(dt.UTC)).total_seconds()))
    (message,) = await all_closed_4401(ws, since=time.monotonic())

    assert message == "The api_key has expired."
    async with by_key(server, fred, brief) as http:
        refused = await http.get("/api/v1/chat/sessions")
    assert refused.status_code == 401 and "expired" in refused.json()["error"]["message"]
    listed = {k["name"]: k for k in (await browser.get(KEYS)).json()["results"]}
    assert listed["brief"]["expired"] is True and listed["first"]["expired"] is False


async def test_a_leaked_key_mints_nothing_so_revoking_it_leaves_nothing_working(people, server, browsers):
    """Before: the leaked key made itself a second key, which outlived its revocation."""
    gina = people["gina"]
    session_id = await new_session(server, gina)
    leaked = gina.key
    async with by_key(server, gina, leaked) as thief:
        minted = await thief.post(KEYS, json={"name": "mine now"})
        assert minted.status_code == 403, minted.text
        assert minted.json()["error"]["code"] == "key_cannot_create_keys"
        assert "key" not in minted.json()
        thiefs_socket = await key_socket(server, session_id, leaked)

        browsers.append(owner := await log_in(server, gina))
        keys = (await owner.get(KEYS)).json()["results"]
        assert [k["name"] for k in keys] == ["first"]  # nothing was minted
        assert (await as_browser(owner, "DELETE", f"{KEYS}/{keys[0]['id']}")).status_code == 200
        await all_closed_4401(thiefs_socket, since=time.monotonic())

        assert (await thief.get("/api/v1/chat/sessions")).status_code == 401
        assert (await thief.post(KEYS, json={"name": "again"})).status_code == 401
    assert (await owner.get(KEYS)).json()["results"] == []  # no key of hers works
    assert "api_key" in await refused_socket(server, session_id, leaked)


async def test_last_used_at_follows_requests_and_sockets_at_most_once_a_minute(people, server, browsers):
    hana = people["hana"]
    session_id = await new_session(server, hana)  # the first key's first use
    browsers.append(browser := await log_in(server, hana))
    fresh = (await as_browser(browser, "POST", KEYS, {"name": "fresh"})).json()

    def last_used(keys: list[dict[str, Any]], name: str) -> str | None:
        return next(k["last_used_at"] for k in keys if k["name"] == name)

    keys = (await browser.get(KEYS)).json()["results"]
    assert last_used(keys, "fresh") is None and last_used(keys, "first") is not None
    ws = await key_socket(server, session_id, fresh["key"])  # a socket's handshake is a use
    await ws.close()
    used = last_used((await browser.get(KEYS)).json()["results"], "fresh")
    assert used is not None
    assert dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(used) < dt.timedelta(seconds=30)
    async with by_key(server, hana, fresh["key"]) as http:
        for _ in range(3):
            assert (await http.get("/api/v1/chat/sessions")).status_code == 200
    assert last_used((await browser.get(KEYS)).json()["results"], "fresh") == used  # within the minute: kept


# --- two processes -------------------------------------------------------------------------------------


@pytest.mark.scaled
async def test_changes_made_on_one_process_close_the_sockets_on_the_other(tmp_path, browsers):
    """Postgres + Redis, sockets on B; the change on A (the admin, REST, a logout) or in a shell."""
    if not os.environ.get("DATABASE_URL", "").startswith(
        ("postgres://", "postgresql://")
    ) or not os.environ.get("REDIS_URL"):
        pytest.fail(
            "the scaled tests need DATABASE_URL=postgres://… and REDIS_URL (make test-services sets them)"
        )
    with server_env(tmp_path) as env, ExitStack() as stack:
        people = new_users(env, "ann", "ben", "cid", "dan", "boss", staff=("boss",))
        staff = people.pop("boss")
        a = stack.enter_context(serve(env))
        b = stack.enter_context(serve(env))
        sockets: dict[str, tuple[Any, Any]] = {}
        logins: dict[str, httpx.AsyncClient] = {}
        for person in people.values():
            session_id = await new_session(b, person)
            browsers.append(browser := await log_in(a, person))  # logged in on A, its socket on B
            logins[person.name] = browser
            sockets[person.name] = (
                await key_socket(b, session_id, person.key),
                await cookie_socket(b, session_id, browser),
            )
        browsers.append(admin := await log_in(a, staff, admin=True))

        await admin_deactivates(admin, people["ann"])  # the admin, on A
        await all_closed_4401(*sockets["ann"], since=time.monotonic())

        bens_key = (await logins["ben"].get(KEYS)).json()["results"][0]["id"]
        revoked = await as_browser(logins["ben"], "DELETE", f"{KEYS}/{bens_key}")  # REST, on A
        assert revoked.status_code == 200
        await all_closed_4401(sockets["ben"][0], since=time.monotonic())
        await still_open(sockets["ben"][1])

        token = logins["cid"].cookies["csrftoken"]
        logout = await logins["cid"].post("/logout/", data={"csrfmiddlewaretoken": token})  # on A
        assert logout.status_code == 302
        await all_closed_4401(sockets["cid"][1], since=time.monotonic())
        await still_open(sockets["cid"][0])

        dan = people["dan"].pk
        env.manage(
            "shell",
            "-c",
            f"from django.contrib.auth.models import User; User.objects.filter(pk={dan}).update(is_active=0)",
        )
        await all_closed_4401(*sockets["dan"], since=time.monotonic())  # a shell, no signal: B's sweep

        for ws in (sockets["ben"][1], sockets["cid"][0]):
            await ws.close()
