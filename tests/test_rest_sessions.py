"""Chat sessions over REST (docs/protocol.md §2): create, list, get, patch, delete, history, and bad input.

The queue endpoints (POST messages etc.) run turns on the live event loop and are tested elsewhere; here
only the refusal of input to a closed session is checked, which happens before the queue is reached.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.test import override_settings

from chat.models import Session
from tests import factories
from tests.test_rest_keys import assert_error

SESSIONS = "/api/v1/chat/sessions"


# --- create ---------------------------------------------------------------------------------------


def test_create_session_with_defaults(api: Any, alice: Any, alice_key: str) -> None:
    response = api(alice_key).post(SESSIONS, {})

    assert response.status_code == 200, response.content
    body = response.json()
    assert {"session_id", "agent_name", "title", "status", "created_at"} <= set(body)
    assert body["agent_name"] == "default"
    assert body["title"] == ""
    assert body["status"] == "open"
    assert uuid.UUID(body["session_id"])
    assert body["created_at"].endswith("+00:00") or body["created_at"].endswith("Z")
    assert Session.objects.get(id=body["session_id"]).user == alice


def test_create_session_keeps_given_id_and_title(api: Any, alice_key: str) -> None:
    response = api(alice_key).post(SESSIONS, {"session_id": "ci:build-42.a_b", "title": "Build"})

    assert response.status_code == 200, response.content
    assert response.json()["session_id"] == "ci:build-42.a_b"
    assert response.json()["title"] == "Build"


def test_create_session_with_a_128_character_id(api: Any, alice_key: str) -> None:
    response = api(alice_key).post(SESSIONS, {"session_id": "s" * 128})
    assert response.status_code == 200, response.content


# "abc\n" was stored (a pattern's `$` matches before a final newline) as a session no lookup finds again.
@pytest.mark.parametrize(
    "session_id", ["", "has space", "slash/inside", "ü", "s" * 129, 123, None, ["x"], "abc\n", " abc"]
)
def test_create_session_with_invalid_id_is_refused(api: Any, alice_key: str, session_id: Any) -> None:
    error = assert_error(api(alice_key).post(SESSIONS, {"session_id": session_id}), 400, "invalid")

    assert set(error["fields"]) == {"session_id"}
    assert all(isinstance(msg, str) for msg in error["fields"]["session_id"])
    assert Session.objects.count() == 0


def test_create_session_with_id_in_use_conflicts(api: Any, alice_key: str) -> None:
    api(alice_key).post(SESSIONS, {"session_id": "mine"})

    assert_error(api(alice_key).post(SESSIONS, {"session_id": "mine"}), 409, "session_exists")


def test_create_session_with_id_owned_by_another_user_conflicts(api: Any, alice: Any, bob_key: str) -> None:
    factories.session(alice, session_id="taken")

    assert_error(api(bob_key).post(SESSIONS, {"session_id": "taken"}), 409, "session_exists")
    assert Session.objects.get(id="taken").user == alice


def test_create_session_for_unknown_agent_is_not_found(api: Any, alice_key: str) -> None:
    error = assert_error(api(alice_key).post(SESSIONS, {"agent_name": "nobody"}), 404, "not_found")

    assert "nobody" in error["message"]
    assert Session.objects.count() == 0


def test_create_session_for_another_agent(api: Any, alice_key: str, staff_key: str) -> None:
    assert api(staff_key).post("/api/v1/agents", {"name": "coder"}).status_code == 201

    response = api(alice_key).post(SESSIONS, {"agent_name": "coder"})

    assert response.status_code == 200, response.content
    assert response.json()["agent_name"] == "coder"


@pytest.mark.parametrize(
    "body",
    [{"title": 123}, {"title": None}, {"title": ["a"]}, {"agent_name": 5}, {"title": "x" * 201}],
)
def test_create_session_with_wrong_types_is_refused(api: Any, alice_key: str, body: dict[str, Any]) -> None:
    error = assert_error(api(alice_key).post(SESSIONS, body), 400, "invalid")

    assert set(error["fields"]) == set(body)
    assert next(iter(body)) in error["message"]


@pytest.mark.parametrize("raw", ["{not json", '{"title": "x",}', "\x00", '{"title": "a"'])
def test_invalid_json_body_is_refused(api: Any, alice_key: str, raw: str) -> None:
    error = assert_error(api(alice_key).post(SESSIONS, raw=raw), 400, "invalid_json")

    assert "JSON" in error["message"]
    assert Session.objects.count() == 0


@pytest.mark.parametrize("raw", ["[]", '"text"', "42", "null"])
def test_json_body_that_is_not_an_object_is_refused(api: Any, alice_key: str, raw: str) -> None:
    assert_error(api(alice_key).post(SESSIONS, raw=raw), 400, "invalid")
    assert Session.objects.count() == 0


def test_body_over_the_limit_is_refused_with_413(api: Any, alice_key: str) -> None:
    with override_settings(AGENTSITE_MAX_BODY_BYTES=2048, DATA_UPLOAD_MAX_MEMORY_SIZE=2048):
        error = assert_error(api(alice_key).post(SESSIONS, {"title": "x" * 3000}), 413, "too_large")
        small = api(alice_key).post(SESSIONS, {"title": "small"})

    assert "2048" in error["message"]
    assert small.status_code == 200
    assert Session.objects.count() == 1


def test_body_over_the_limit_is_refused_before_authentication(api: Any, db: Any) -> None:
    with override_settings(AGENTSITE_MAX_BODY_BYTES=1024):
        assert_error(api(None).post(SESSIONS, {"title": "x" * 2000}), 413, "too_large")


# --- list -----------------------------------------------------------------------------------------


def test_list_shows_own_sessions_newest_first(api: Any, alice: Any, bob: Any, alice_key: str) -> None:
    for name in ["first", "second", "third"]:
        factories.session(alice, session_id=name)
    factories.session(bob, session_id="bobs")

    response = api(alice_key).get(SESSIONS)

    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"results", "next"}
    assert [s["session_id"] for s in body["results"]] == ["third", "second", "first"]
    assert body["next"] is None
    assert body["results"][0]["status"] == "open"


def test_list_is_empty_for_a_new_user(api: Any, bob_key: str) -> None:
    assert api(bob_key).get(SESSIONS).json() == {"results": [], "next": None}


def test_list_pages_with_limit_and_cursor(api: Any, alice: Any, alice_key: str) -> None:
    ids = [f"s{i:02d}" for i in range(7)]
    for session_id in ids:
        factories.session(alice, session_id=session_id)
    expected = list(reversed(ids))

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        url = f"{SESSIONS}?limit=3" + (f"&cursor={cursor}" if cursor else "")
        body = api(alice_key).get(url).json()
        pages += 1
        assert len(body["results"]) <= 3
        seen += [s["session_id"] for s in body["results"]]
        cursor = body["next"]
        if cursor is None:
            break
        assert isinstance(cursor, str) and "http" not in cursor

    assert seen == expected
    assert pages == 3


def test_list_pages_do_not_skip_sessions_created_in_the_same_instant(
    api: Any, alice: Any, alice_key: str
) -> None:
    same_instant = Session.objects.create(id="a", user=alice).created_at
    for session_id in ["b", "c", "d"]:
        Session.objects.create(id=session_id, user=alice, created_at=same_instant)

    seen: list[str] = []
    cursor = None
    while True:
        body = api(alice_key).get(f"{SESSIONS}?limit=1" + (f"&cursor={cursor}" if cursor else "")).json()
        seen += [s["session_id"] for s in body["results"]]
        cursor = body["next"]
        if cursor is None:
            break

    assert sorted(seen) == ["a", "b", "c", "d"]
    assert len(seen) == 4


@pytest.mark.parametrize("limit", ["0", "-1", "501", "abc", "1.5", ""])
def test_list_with_bad_limit_is_refused(api: Any, alice_key: str, limit: str) -> None:
    error = assert_error(api(alice_key).get(f"{SESSIONS}?limit={limit}"), 400, "invalid")
    assert "limit" in error["message"]


def test_list_accepts_the_maximum_limit(api: Any, alice_key: str) -> None:
    assert api(alice_key).get(f"{SESSIONS}?limit=500").status_code == 200


def test_list_with_bad_cursor_is_refused(api: Any, alice_key: str) -> None:
    error = assert_error(api(alice_key).get(f"{SESSIONS}?cursor=garbage"), 400, "invalid")
    assert "cursor" in error["message"]


def test_list_query_count_does_not_grow_with_sessions(
    api: Any, alice: Any, alice_key: str, django_assert_num_queries: Any
) -> None:
    # authenticate the key (the key, its user), then one query for the page; last_used_at is already fresh.
    api(alice_key).get(SESSIONS)
    factories.session(alice)
    with django_assert_num_queries(3):
        assert len(api(alice_key).get(SESSIONS).json()["results"]) == 1
    for _ in range(20):
        factories.session(alice)
    with django_assert_num_queries(3):
        assert len(api(alice_key).get(SESSIONS).json()["results"]) == 21


# --- get / patch / delete -------------------------------------------------------------------------


def test_get_session_includes_snapshot(api: Any, alice: Any, alice_key: str) -> None:
    factories.session(alice, session_id="one", title="Hello")

    response = api(alice_key).get(f"{SESSIONS}/one")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["session_id"] == "one"
    assert body["title"] == "Hello"
    assert body["status"] == "open"
    snapshot = body["snapshot"]
    assert snapshot["running"] is False
    assert snapshot["pending"] == []
    assert snapshot["active_message_id"] is None


def test_missing_session_is_not_found(api: Any, alice_key: str) -> None:
    assert_error(api(alice_key).get(f"{SESSIONS}/nope"), 404, "not_found")
    assert_error(api(alice_key).get(f"{SESSIONS}/bad%20id"), 404, "not_found")


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("get", "", None),
        ("patch", "", {"title": "hijacked"}),
        ("delete", "", None),
        ("get", "/messages", None),
        ("post", "/messages", {"content": "hi"}),
        ("post", "/cancel", {}),
    ],
)
def test_another_users_session_answers_exactly_like_a_missing_one(
    api: Any, alice: Any, bob_key: str, method: str, suffix: str, body: Any
) -> None:
    factories.session(alice, session_id="alices", title="private")
    client = api(bob_key)
    call = getattr(client, method)
    args = (f"{SESSIONS}/alices{suffix}",) + ((body,) if body is not None else ())

    foreign = call(*args)
    Session.objects.filter(id="alices").delete()
    missing = call(*args)

    assert_error(foreign, 404, "not_found")
    assert foreign.status_code == missing.status_code
    assert foreign.json() == missing.json()
    assert "private" not in foreign.content.decode()


def test_another_users_session_is_left_untouched(api: Any, alice: Any, alice_key: str, bob_key: str) -> None:
    factories.session(alice, session_id="alices", title="private")

    api(bob_key).patch(f"{SESSIONS}/alices", {"title": "hijacked"})
    api(bob_key).delete(f"{SESSIONS}/alices")

    body = api(alice_key).get(f"{SESSIONS}/alices").json()
    assert body["title"] == "private"
    assert body["status"] == "open"


def test_patch_renames_session(api: Any, alice: Any, alice_key: str) -> None:
    factories.session(alice, session_id="one")

    response = api(alice_key).patch(f"{SESSIONS}/one", {"title": "Renamed"})

    assert response.status_code == 200, response.content
    assert response.json()["title"] == "Renamed"
    assert response.json()["session_id"] == "one"
    assert api(alice_key).get(f"{SESSIONS}/one").json()["title"] == "Renamed"


@pytest.mark.parametrize("body", [{"title": 123}, {"title": None}, {}, {"title": "x" * 201}])
def test_patch_with_bad_title_is_refused(api: Any, alice: Any, alice_key: str, body: dict[str, Any]) -> None:
    factories.session(alice, session_id="one", title="kept")

    error = assert_error(api(alice_key).patch(f"{SESSIONS}/one", body), 400, "invalid")

    assert set(error["fields"]) == {"title"}
    assert Session.objects.get(id="one").title == "kept"


def test_patch_with_invalid_json_is_refused(api: Any, alice: Any, alice_key: str) -> None:
    factories.session(alice, session_id="one")
    assert_error(api(alice_key).patch(f"{SESSIONS}/one", raw="{oops"), 400, "invalid_json")


def test_delete_closes_session_and_keeps_it_readable(api: Any, alice: Any, alice_key: str) -> None:
    factories.session(alice, session_id="one")

    response = api(alice_key).delete(f"{SESSIONS}/one")

    assert response.status_code == 200, response.content
    assert response.json() == {"session_id": "one", "status": "closed"}
    detail = api(alice_key).get(f"{SESSIONS}/one").json()
    assert detail["status"] == "closed"
    assert detail["snapshot"]["running"] is False
    assert api(alice_key).get(f"{SESSIONS}/one/messages").status_code == 200
    assert [s["status"] for s in api(alice_key).get(SESSIONS).json()["results"]] == ["closed"]


def test_closed_session_refuses_new_input(api: Any, alice: Any, alice_key: str) -> None:
    factories.session(alice, session_id="one")
    api(alice_key).delete(f"{SESSIONS}/one")

    error = assert_error(api(alice_key).post(f"{SESSIONS}/one/messages", {"content": "hi"}), 409)

    assert error["code"] == "session_closed"


def test_delete_twice_is_harmless(api: Any, alice: Any, alice_key: str) -> None:
    factories.session(alice, session_id="one")
    api(alice_key).delete(f"{SESSIONS}/one")

    response = api(alice_key).delete(f"{SESSIONS}/one")

    assert response.status_code == 200
    assert response.json() == {"session_id": "one", "status": "closed"}


def test_closed_session_can_be_renamed(api: Any, alice: Any, alice_key: str) -> None:
    factories.session(alice, session_id="one")
    api(alice_key).delete(f"{SESSIONS}/one")

    assert api(alice_key).patch(f"{SESSIONS}/one", {"title": "archived"}).status_code == 200


def test_deleted_session_id_stays_taken(api: Any, alice: Any, alice_key: str) -> None:
    factories.session(alice, session_id="one")
    api(alice_key).delete(f"{SESSIONS}/one")

    assert_error(api(alice_key).post(SESSIONS, {"session_id": "one"}), 409, "session_exists")


# --- history --------------------------------------------------------------------------------------


def test_messages_of_a_new_session_are_empty(api: Any, alice: Any, alice_key: str) -> None:
    factories.session(alice, session_id="one")

    response = api(alice_key).get(f"{SESSIONS}/one/messages")

    assert response.status_code == 200, response.content
    assert response.json() == {"results": [], "next": None}


def test_messages_are_listed_oldest_first_with_their_fields(api: Any, alice: Any, alice_key: str) -> None:
    from django.utils import timezone

    session = factories.session(alice, session_id="one")
    now = timezone.now()
    session.messages.create(message_id="m1", role="user", content="hello", entered_at=now)
    session.messages.create(
        message_id="m2", role="assistant", content="hi there", entered_at=now, usage={"total_tokens": 3}
    )
    session.messages.create(message_id="m3", role="user", content="queued", status="pending")

    body = api(alice_key).get(f"{SESSIONS}/one/messages").json()

    assert [m["message_id"] for m in body["results"]] == ["m1", "m2"]
    first, second = body["results"]
    assert {"message_id", "role", "content", "status", "created_at"} <= set(first)
    assert first["role"] == "user" and first["content"] == "hello"
    assert second["usage"] == {"total_tokens": 3}


def test_messages_page_with_limit_and_cursor_oldest_first(api: Any, alice: Any, alice_key: str) -> None:
    """Issue 14: `?limit=` was ignored here, even `limit=abc`."""
    from django.utils import timezone

    session = factories.session(alice, session_id="one")
    same_instant = timezone.now()
    for index in range(5):
        session.messages.create(message_id=f"m{index}", role="user", content="hi", entered_at=same_instant)

    seen: list[str] = []
    cursor = None
    while True:
        url = f"{SESSIONS}/one/messages?limit=2" + (f"&cursor={cursor}" if cursor else "")
        body = api(alice_key).get(url).json()
        assert len(body["results"]) <= 2
        seen += [m["message_id"] for m in body["results"]]
        if (cursor := body["next"]) is None:
            break
    assert seen == [f"m{index}" for index in range(5)]
    for limit in ("abc", "", "%202", "1_0", "%D9%A7"):  # " 2", "1_0" and "٧" pass int(), not the schema
        error = assert_error(api(alice_key).get(f"{SESSIONS}/one/messages?limit={limit}"), 400, "invalid")
        assert error["message"] == "limit: Must be an integer between 1 and 500."


def test_the_event_stream_answers_json_errors_to_an_event_source(
    api: Any, alice: Any, alice_key: str
) -> None:
    """A browser's EventSource sends `Accept: text/event-stream`: it got 406 from the JSON-only API."""
    factories.session(alice, session_id="gone")
    api(alice_key).delete(f"{SESSIONS}/gone")
    accept = {"HTTP_ACCEPT": "text/event-stream", "HTTP_AUTHORIZATION": f"Bearer {alice_key}"}
    from django.test import Client

    client = Client()
    assert_error(client.get(f"{SESSIONS}/gone/events", **accept), 409, "session_closed")
    assert_error(client.get(f"{SESSIONS}/missing/events", **accept), 404, "not_found")


@pytest.mark.parametrize("since", ["", "abc", "1.5"])
def test_an_event_stream_since_that_is_no_seq_is_400(
    api: Any, alice: Any, alice_key: str, since: str
) -> None:
    """`?since=` (empty) was taken for no `since` (found by schemathesis: the document says integer)."""
    factories.session(alice, session_id="one")
    error = assert_error(api(alice_key).get(f"{SESSIONS}/one/events?since={since}"), 400, "invalid")
    assert "since" in error["message"]


# --- method and misc ------------------------------------------------------------------------------


def test_unsupported_method_answers_405_with_error_shape(api: Any, alice_key: str) -> None:
    assert_error(api(alice_key).put(SESSIONS, {}), 405, "method_not_allowed")


def test_unknown_api_path_answers_json_404(api: Any, alice_key: str) -> None:
    response = api(alice_key).get("/api/v1/does-not-exist")
    assert_error(response, 404, "not_found")
    assert response["Content-Type"].startswith("application/json")


def test_error_bodies_are_json(api: Any, alice_key: str) -> None:
    response = api(alice_key).post(SESSIONS, raw="{")
    assert response["Content-Type"].startswith("application/json")
    json.loads(response.content)


@pytest.mark.django_db(transaction=True)
async def test_a_chunked_body_over_the_limit_is_413(alice_key, settings):
    """No Content-Length (chunked upload through the ASGI app): the limit still holds."""
    import httpx

    from agentsite.asgi import application

    settings.AGENTSITE_MAX_BODY_BYTES = 2048

    async def chunks():  # type: ignore[no-untyped-def]
        yield b'{"title": "'
        yield b"x" * 4096
        yield b'"}'

    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        response = await client.post(
            "/api/v1/chat/sessions",
            content=chunks(),
            headers={"Authorization": f"Bearer {alice_key}", "Content-Type": "application/json"},
        )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"


def test_closing_a_session_whose_turn_no_process_ends_lists_it_cancelled(
    api: Any, alice: Any, alice_key: str
) -> None:
    """A running message left by a process that is gone was listed `closed`, not a status of the history."""
    from django.utils import timezone

    session = factories.session(alice, session_id="one")
    session.messages.create(
        message_id="m1", role="user", content="hi", status="running", entered_at=timezone.now()
    )
    session.messages.create(message_id="m2", role="user", content="next", status="pending")
    assert api(alice_key).delete(f"{SESSIONS}/one").status_code == 200
    history = api(alice_key).get(f"{SESSIONS}/one/messages").json()["results"]
    assert [(m["message_id"], m["status"]) for m in history] == [("m1", "cancelled")]


def test_the_migration_takes_restored_and_closed_rows_out_of_the_history_statuses(alice: Any) -> None:
    import importlib

    from django.apps import apps
    from django.utils import timezone

    migration = importlib.import_module("chat.migrations.0007_restored_messages_leave_the_history")
    session = factories.session(alice, session_id="old")
    now = timezone.now()
    for message_id, status in [("restored", "pending"), ("cut", "closed"), ("done", "completed")]:
        session.messages.create(
            message_id=message_id, role="user", content="x", status=status, entered_at=now
        )
    migration.forwards(apps, None)
    listed = {m.message_id: m.status for m in session.messages.filter(entered_at__isnull=False)}
    assert listed == {"cut": "cancelled", "done": "completed"}
