"""Session preferences and lists (docs/protocol.md extensions "Sessions"): search, archive, delete from the
lists, the remembered approval mode, one timestamp format, and `updated_at` following activity."""

from __future__ import annotations

import re
from typing import Any

from chat.models import Message, Session
from tests import factories
from tests.test_rest_keys import assert_error

SESSIONS = "/api/v1/chat/sessions"
ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def ids(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [s["session_id"] for s in response.json()["results"]]


def said(session: Session, role: str, content: str) -> None:
    from django.utils import timezone

    Message.objects.create(
        session=session, message_id=f"m-{content[:8]}-{role}", role=role, content=content,
        entered_at=timezone.now(),
    )  # fmt: skip


def test_search_finds_title_and_message_content_of_own_sessions_only(
    api: Any, alice: Any, bob: Any, alice_key: str
) -> None:
    by_title = factories.session(alice, session_id="t", title="Quarterly Budget")
    by_text = factories.session(alice, session_id="c", title="Misc")
    said(by_text, "assistant", "the BUDGET is fine")
    said(factories.session(alice, session_id="tool"), "tool", "budget in a tool output")
    said(factories.session(bob, session_id="bobs", title="budget"), "user", "budget")
    factories.session(alice, session_id="other", title="Holiday")

    assert sorted(ids(api(alice_key).get(f"{SESSIONS}?q=budget"))) == [by_text.id, by_title.id]
    assert len(ids(api(alice_key).get(SESSIONS))) == 4


def test_archived_sessions_leave_the_list_and_come_back_with_the_filter(
    api: Any, alice: Any, alice_key: str
) -> None:
    factories.session(alice, session_id="keep")
    factories.session(alice, session_id="old")
    client = api(alice_key)

    body = client.patch(f"{SESSIONS}/old", {"archived": True}).json()

    assert body["archived_at"] and ISO_Z.match(body["archived_at"])
    assert ids(client.get(SESSIONS)) == ["keep"]
    assert ids(client.get(f"{SESSIONS}?archived=true")) == ["old"]
    assert client.patch(f"{SESSIONS}/old", {"archived": False}).json()["archived_at"] is None
    assert sorted(ids(client.get(SESSIONS))) == ["keep", "old"]
    assert_error(client.get(f"{SESSIONS}?archived=maybe"), 400, "invalid")


def test_approval_mode_is_remembered_per_session_and_validated(api: Any, alice: Any, alice_key: str) -> None:
    factories.session(alice, session_id="s", title="Kept")
    client = api(alice_key)
    assert client.get(f"{SESSIONS}/s").json()["approval_mode"] == "ask"

    body = client.patch(f"{SESSIONS}/s", {"approval_mode": "full_access"}).json()

    assert (body["approval_mode"], body["title"]) == ("full_access", "Kept")  # the title is left alone
    assert client.get(f"{SESSIONS}/s").json()["approval_mode"] == "full_access"
    error = assert_error(client.patch(f"{SESSIONS}/s", {"approval_mode": "yolo"}), 400, "invalid")
    assert set(error["fields"]) == {"approval_mode"}
    assert_error(client.patch(f"{SESSIONS}/s", {"archived": "yes"}), 400, "invalid")


def test_delete_with_hide_closes_and_removes_from_every_list_but_history_stays(
    api: Any, alice: Any, alice_key: str
) -> None:
    factories.session(alice, session_id="gone", title="Secret plan")
    client = api(alice_key)

    response = client.delete(f"{SESSIONS}/gone?hide=true")

    assert response.json() == {"session_id": "gone", "status": "closed"}
    assert ids(client.get(SESSIONS)) == [] and ids(client.get(f"{SESSIONS}?archived=true")) == []
    assert ids(client.get(f"{SESSIONS}?q=secret")) == []
    assert client.get(f"{SESSIONS}/gone").json()["status"] == "closed"
    assert client.delete(f"{SESSIONS}/gone?hide=true").status_code == 200  # again: same answer


def test_another_users_session_cannot_be_patched_or_hidden(api: Any, alice: Any, bob_key: str) -> None:
    factories.session(alice, session_id="hers")

    assert_error(api(bob_key).patch(f"{SESSIONS}/hers", {"archived": True}), 404, "not_found")
    assert_error(api(bob_key).delete(f"{SESSIONS}/hers?hide=true"), 404, "not_found")
    assert Session.objects.get(id="hers").archived_at is None


def test_every_timestamp_of_the_api_is_utc_with_z(api: Any, alice: Any, alice_key: str) -> None:
    session = factories.session(alice, session_id="s")
    said(session, "user", "hello")
    client = api(alice_key)
    key = client.get("/api/v1/auth/keys").json()["results"][0]

    stamps = [
        client.get(f"{SESSIONS}/s").json()["created_at"],
        client.get(f"{SESSIONS}/s").json()["updated_at"],
        client.get(SESSIONS).json()["results"][0]["updated_at"],
        client.get(f"{SESSIONS}/s/messages").json()["results"][0]["created_at"],
        key["created_at"],
        client.get("/api/v1/providers").json()["results"][0]["created_at"]
        if client.get("/api/v1/providers").json()["results"]
        else key["created_at"],
    ]
    assert all(ISO_Z.match(stamp) for stamp in stamps), stamps


def test_a_new_message_moves_the_sessions_updated_at(alice: Any) -> None:
    import datetime as dt

    from agents.contract import ChatRequest
    from chat.live.queue import PendingItem
    from chat.store import DjangoQueueStore

    session = factories.session(alice, session_id="s")
    Session.objects.filter(id="s").update(updated_at=session.updated_at - dt.timedelta(hours=3))
    before = Session.objects.get(id="s").updated_at
    item = PendingItem(request=ChatRequest(message_id="m1", content="hi there"), order=0)

    DjangoQueueStore("s")._save_message(item, "pending", True, None)

    after = Session.objects.get(id="s")
    assert after.updated_at > before + dt.timedelta(hours=2)
    assert after.title == "hi there"
