"""agentsite/db.py: the batched database thread and the hot-path SQL helpers (also on Postgres)."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from accounts.models import ApiKey
from accounts.services import api_key_create
from agents.contract import ChatRequest, InputError
from agentsite import db
from agentsite.db import database_call, database_sync_to_async, insert_row
from chat.models import Message, Session
from chat.store import history_for_model, message_store_pending
from tests import factories
from tests.support.stack import speed_layer_only

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services_rerun]


def _session(username: str = "alice") -> Session:
    return factories.session(factories.user(username))


def _columns(row: Message) -> dict[str, Any]:
    return {
        field.attname: getattr(row, field.attname)
        for field in Message._meta.concrete_fields
        if field.attname != "id"
    }


def test_insert_row_stores_what_the_orm_stores() -> None:
    session = _session()
    when = timezone.now()
    values: dict[str, Any] = dict(
        session_id=session.id,
        role=Message.Role.ASSISTANT,
        content="héllo ✓",
        status="completed",
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "x", "arguments": "{}"}}],
        usage={"prompt_tokens": 3, "total_tokens": 5},
        queue_order=7,
        steer_requested=True,
        config={"generation": {"temperature": 0.2}, "nested": [1, None, "x"]},
        model="m",
        created_at=when,
        entered_at=when,
    )
    Message.objects.create(message_id="orm", **values)
    insert_row(Message, message_id="raw", **values)
    orm, raw = Message.objects.get(message_id="orm"), Message.objects.get(message_id="raw")
    assert {**_columns(raw), "message_id": "orm"} == _columns(orm)


def test_insert_row_fills_defaults_and_keeps_sql_null_for_json() -> None:
    session = _session()
    before = timezone.now()
    insert_row(Message, session_id=session.id, message_id="m1", role=Message.Role.USER, content="hi")
    row = Message.objects.get(message_id="m1")
    assert (row.status, row.approval_mode, row.steer_requested, row.reply_to) == (
        "completed",
        "ask",
        False,
        "",
    )
    assert row.created_at >= before and row.entered_at is None
    assert Message.objects.filter(message_id="m1", tool_calls__isnull=True, config__isnull=True).exists()


def test_insert_row_refuses_unknown_fields_and_duplicate_ids() -> None:
    from django.db import IntegrityError

    session = _session()
    with pytest.raises(TypeError, match="no_such_field"):
        insert_row(Message, session_id=session.id, message_id="m", role="user", no_such_field=1)
    insert_row(Message, session_id=session.id, message_id="m", role="user")
    with pytest.raises(IntegrityError):
        insert_row(Message, session_id=session.id, message_id="m", role="user")
    assert Message.objects.filter(session=session).count() == 1


def test_update_rows_stores_what_the_orm_update_stores_and_counts_rows() -> None:
    session = _session()
    for message_id in ("orm", "raw", "other"):
        insert_row(Message, session_id=session.id, message_id=message_id, role=Message.Role.ASSISTANT)
    when = timezone.now()
    values: dict[str, Any] = dict(
        content="héllo ✓",
        status="completed",
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "x", "arguments": "{}"}}],
        usage=None,
        steer_requested=True,
        entered_at=when,
    )
    Message.objects.filter(session_id=session.id, message_id="orm").update(**values)
    assert db.update_rows(Message, {"session_id": session.id, "message_id": "raw"}, **values) == 1
    assert db.update_rows(Message, {"session_id": session.id, "message_id": "none"}, status="x") == 0
    orm, raw = Message.objects.get(message_id="orm"), Message.objects.get(message_id="raw")
    assert {**_columns(raw), "message_id": "orm"} == {**_columns(orm), "created_at": raw.created_at}
    assert Message.objects.get(message_id="other").content == ""
    assert Message.objects.filter(message_id="raw", usage__isnull=True).exists()


def test_history_reads_rows_in_the_order_they_entered_the_conversation() -> None:
    session = _session()
    base = timezone.now()
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    rows = [
        ("u1", "user", "first", None, "", 1),
        ("a1", "assistant", "", [call], "", 2),
        ("t1", "tool", "file text", None, "c1", 3),
        ("a2", "assistant", "done", None, "", 4),
        ("queued", "user", "not yet", None, "", None),  # queued: not in the conversation yet
        ("u2", "user", "current", None, "", 5),
    ]
    for message_id, role, content, tool_calls, call_id, offset in rows:
        entered = None if offset is None else base + dt.timedelta(seconds=offset)
        insert_row(
            Message,
            session_id=session.id,
            message_id=message_id,
            role=role,
            content=content,
            tool_calls=tool_calls,
            tool_call_id=call_id,
            entered_at=entered,
        )
    assert history_for_model(session.id, before_message_id="u2") == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "file text"},
        {"role": "assistant", "content": "done"},
    ]


def test_storing_a_message_claims_its_id_in_its_session_only() -> None:
    session, other = _session(), _session("bob")
    message_store_pending(session_id=session.id, request=ChatRequest(message_id="m", content="one"))
    with pytest.raises(InputError) as duplicate:
        message_store_pending(session_id=session.id, request=ChatRequest(message_id="m", content="two"))
    assert duplicate.value.code == "duplicate_message_id" and duplicate.value.status == 409
    message_store_pending(session_id=other.id, request=ChatRequest(message_id="m", content="three"))
    assert list(Message.objects.filter(message_id="m").values_list("content", flat=True).order_by("id")) == [
        "one",
        "three",
    ]


async def test_concurrent_calls_keep_their_order_and_each_gets_its_own_outcome() -> None:
    seen: list[int] = []
    threads: set[str] = set()

    def work(n: int) -> int:
        threads.add(threading.current_thread().name)
        seen.append(n)
        if n % 7 == 3:
            raise ValueError(f"bad {n}")
        return n * 10

    run = database_sync_to_async(work)
    outcomes = await asyncio.gather(*(run(n) for n in range(40)), return_exceptions=True)
    assert seen == list(range(40)), "calls run in the order they were made"
    for n, outcome in enumerate(outcomes):
        if n % 7 == 3:
            assert isinstance(outcome, ValueError) and str(outcome) == f"bad {n}"
        else:
            assert outcome == n * 10
    assert len(threads) == 1 and threading.current_thread().name not in threads


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every batch handed to the database thread."""
    sizes: list[int] = []
    original = db._DatabaseThread._run

    def counting_run(self: Any, batch: list[Any]) -> None:
        sizes.append(len(batch))
        original(self, batch)

    monkeypatch.setattr(db._DatabaseThread, "_run", counting_run)
    return sizes


@speed_layer_only
async def test_calls_made_while_the_thread_is_busy_go_over_together(batches: list[int]) -> None:
    release = threading.Event()

    def slow() -> str:
        release.wait(5)
        return "slow"

    first = asyncio.ensure_future(database_sync_to_async(slow)())
    await asyncio.sleep(0.05)  # `slow` holds the thread
    rest = [asyncio.ensure_future(database_sync_to_async(lambda n=n: n)()) for n in range(25)]
    await asyncio.sleep(0.05)
    release.set()
    assert await first == "slow"
    assert await asyncio.gather(*rest) == list(range(25))
    assert batches == [1, 25]


async def test_a_caller_that_stops_waiting_does_not_lose_the_call_or_disturb_others() -> None:
    release = threading.Event()
    done: list[str] = []

    def slow(name: str) -> str:
        release.wait(5)
        done.append(name)
        return name

    waiting = asyncio.ensure_future(database_sync_to_async(slow)("cancelled"))
    other = asyncio.ensure_future(database_sync_to_async(slow)("other"))
    await asyncio.sleep(0.05)
    waiting.cancel()
    release.set()
    assert await other == "other"
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert done == ["cancelled", "other"], "the write that was asked for still happened"


def test_under_async_to_sync_calls_run_in_the_waiting_callers_thread() -> None:
    """A sync caller blocked in async_to_sync keeps its own thread (and its transaction) for our calls."""
    caller = threading.current_thread().name

    async def ask() -> str:
        return await database_sync_to_async(lambda: threading.current_thread().name)()

    assert async_to_sync(ask)() == caller


@speed_layer_only
async def test_a_broken_connection_is_closed_so_the_next_call_opens_a_fresh_one() -> None:
    from django.db import OperationalError

    def fail(usable: bool) -> int:
        """This thread's connection, said to be (un)usable, fails a statement; returns its identity."""
        connection.ensure_connection()
        connection.is_usable = lambda: usable  # type: ignore[method-assign]  # this thread's wrapper only
        raise OperationalError(f"statement failed ({id(connection.connection)})")

    def state() -> tuple[int | None, bool]:
        connection.__dict__.pop("is_usable", None)
        kept = connection.connection is not None
        return (id(connection.connection) if kept else None), kept

    def survives_close() -> bool:  # an in-memory SQLite test database ignores close()
        return connection.vendor == "sqlite" and connection.is_in_memory_db()  # type: ignore[attr-defined]

    with pytest.raises(OperationalError):
        await database_sync_to_async(fail)(True)
    before, kept = await database_sync_to_async(state)()
    assert kept, "a usable connection is kept (a failed statement does not break it)"
    with pytest.raises(OperationalError):
        await database_sync_to_async(fail)(False)
    _, kept = await database_sync_to_async(state)()
    if not await database_sync_to_async(survives_close)():
        assert not kept, "an unusable connection is closed"
    assert await database_sync_to_async(lambda: Session.objects.count())() == 0


@speed_layer_only
async def test_calls_made_together_go_over_together(batches: list[int]) -> None:
    """Calls queued in the same turn of the event loop share one hand-over, even when the thread is idle."""
    first, second = database_call(lambda: "a"), database_call(str.upper, "b")
    assert await asyncio.gather(first, second) == ["a", "B"]
    assert await database_sync_to_async(lambda: "alone")() == "alone"
    assert batches == [2, 1]


async def test_a_fenced_owner_writes_nothing_and_the_current_owner_writes() -> None:
    """With several processes every queue write checks the session's owner token (chat/store.py Fence)."""
    from agents.contract import ChatRequest
    from chat.live.queue import PendingItem
    from chat.store import DjangoQueueStore, Fenced

    session = await database_sync_to_async(_session)()
    await database_sync_to_async(Session.objects.filter(id=session.id).update)(owner_token=7)
    item = PendingItem(request=ChatRequest(message_id="m1", content="hi"), order=0)
    with pytest.raises(Fenced):
        await DjangoQueueStore(session.id, token=6).save_message(item, status="pending")
    assert not await database_sync_to_async(Message.objects.filter(message_id="m1").exists)()
    current = DjangoQueueStore(session.id, token=7)
    await current.save_message(item, status="pending")
    await current.save_message(item, status="running")
    row = await database_sync_to_async(Message.objects.get)(message_id="m1")
    assert (row.status, row.queue_order, row.entered_at is not None) == ("running", 0, True)
    with pytest.raises(Fenced):
        await DjangoQueueStore(session.id, token=6).save_message(item, status="cancelled")
    assert (await database_sync_to_async(Message.objects.get)(message_id="m1")).status == "running"


async def test_a_fenced_turn_and_event_log_write_nothing_and_the_current_owners_do() -> None:
    """Every write of the live core goes through the one fence (chat/store.py Fence), not only the queue's:
    the rows a turn writes as it goes (streaming and partial text, tool results, its usage and the session's
    activity) and the event log's seq reservations. An owner that lost the session changes none of them."""
    from chat.models import Usage
    from chat.store import DjangoQueueStore, DjangoTurnRecorder, Fenced

    session = await database_sync_to_async(_session)()
    await database_sync_to_async(Session.objects.filter(id=session.id).update)(owner_token=7)
    before = await database_sync_to_async(Session.objects.get)(id=session.id)
    old = DjangoTurnRecorder(session.id, "m1", "fake-model", session.user_id, token=6)
    usage = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    writes = [
        old.progress("partial", ""),
        old.progress("partial, more", ""),
        old.partial("partial, more", "", "cancelled"),
        old.assistant_message("done", [], usage),
        old.tool_result("call-1", "shell", "output", False),
        DjangoQueueStore(session.id, token=6).reserve_seq(before.seq_reserved + 1000),
        DjangoQueueStore(session.id, token=6).save_paused(True),
    ]
    for write in writes:
        with pytest.raises(Fenced):
            await write
    after = await database_sync_to_async(Session.objects.get)(id=session.id)
    assert (after.updated_at, after.seq_reserved, after.paused) == (
        before.updated_at,
        before.seq_reserved,
        before.paused,
    )
    assert not await database_sync_to_async(Message.objects.filter(session_id=session.id).exists)()
    assert not await database_sync_to_async(Usage.objects.exists)()

    current = DjangoTurnRecorder(session.id, "m1", "fake-model", session.user_id, token=7)
    await current.progress("partial", "")
    await current.assistant_message("done", [], usage)
    await current.tool_result("call-1", "shell", "output", False)
    await DjangoQueueStore(session.id, token=7).reserve_seq(before.seq_reserved + 1000)
    rows = await database_sync_to_async(list)(
        Message.objects.filter(session_id=session.id).order_by("id").values_list("role", "status", "content")
    )
    assert rows == [("assistant", "completed", "done"), ("tool", "completed", "output")]
    assert (await database_sync_to_async(Usage.objects.get)()).total_tokens == 7
    reserved = (await database_sync_to_async(Session.objects.get)(id=session.id)).seq_reserved
    assert reserved == before.seq_reserved + 1000


@speed_layer_only
async def test_when_no_connection_can_be_had_the_calls_after_fail_at_once_for_a_moment() -> None:
    """One call waits for the database that does not answer; the calls queued behind it do not each wait
    as long again (a turn's failed write is then told within seconds)."""
    from django.db import OperationalError

    attempts: list[str] = []

    def unreachable() -> None:
        connection.close()
        real = connection.get_new_connection

        def refuse(params: dict[str, Any]) -> Any:
            attempts.append("connect")
            raise OperationalError("connection refused")

        connection.get_new_connection = refuse  # type: ignore[method-assign]  # this thread's wrapper only
        try:
            connection.ensure_connection()
        finally:
            connection.get_new_connection = real  # type: ignore[method-assign]

    def count() -> int:
        attempts.append("count")
        return Session.objects.count()

    if connection.vendor == "sqlite" and connection.is_in_memory_db():  # type: ignore[attr-defined]
        pytest.skip("an in-memory SQLite test database ignores close()")
    outcomes = await asyncio.gather(
        database_call(unreachable), database_call(count), database_call(count), return_exceptions=True
    )
    assert all(isinstance(outcome, OperationalError) for outcome in outcomes)
    assert attempts == ["connect"], "the calls behind the failed connection did not try again"
    assert "connection refused" in str(outcomes[1])
    await asyncio.sleep(db.DOWN_SECONDS)
    assert await database_call(count) == 0  # a moment later, the next call tries again (and succeeds)


def test_a_new_sessions_state_loads_in_one_read_after_its_seq_reservation() -> None:
    """Issue 18: every socket that opens a session nobody has loaded reads its state (chat/store.py)."""
    from django.test.utils import CaptureQueriesContext

    from chat.store import load_state

    session = _session()
    with CaptureQueriesContext(connection) as captured:
        state = load_state(session.id, seq_block=1000)
    statements = [q["sql"].split()[0] for q in captured.captured_queries]
    # the reservation, then the session and its queue in one read (in a transaction: BEGIN/COMMIT on SQLite)
    assert [s for s in statements if s not in ("BEGIN", "COMMIT")] == ["UPDATE", "SELECT"]
    assert (state.pending, state.running_message_ids, state.paused, state.next_order) == ([], [], False, 0)
    assert state.seq_reserved == 0 and state.user_id == session.user_id
    assert Session.objects.get(id=session.id).seq_reserved == 1000
    assert load_state(session.id, seq_block=1000).seq_reserved == 1000


def test_load_state_gives_the_queue_in_order_and_the_turns_that_were_running() -> None:
    from chat.store import load_state

    session = _session()
    Session.objects.filter(id=session.id).update(paused=True, seq_reserved=3000)
    base = timezone.now()

    def stored(message_id: str, status: str, order: int | None, seconds: int, **extra: Any) -> None:
        insert_row(
            Message,
            session_id=session.id,
            message_id=message_id,
            role=Message.Role.USER,
            content=f"text {message_id}",
            status=status,
            queue_order=order,
            created_at=base + dt.timedelta(seconds=seconds),
            **extra,
        )

    stored("done", "completed", 0, 0)
    stored("run", "running", 1, 1)
    stored("late-b", "pending", None, 6)  # stored while the session had no owner: last, oldest first
    stored("p3", "pending", 3, 2, config={"generation": {"temperature": 0.5}}, model="m2")
    stored("late-a", "pending", None, 5, approval_mode="full")
    stored("p2", "pending", 2, 3)
    stored("gone", "removed", 4, 4)
    insert_row(
        Message, session_id=session.id, message_id="answer", role=Message.Role.ASSISTANT, status="running"
    )

    state = load_state(session.id, seq_block=1000)

    assert [(item.request.message_id, item.order) for item in state.pending] == [
        ("p2", 2),
        ("p3", 3),
        ("late-a", 5),
        ("late-b", 6),
    ]
    p3, late_a = state.pending[1].request, state.pending[2].request
    assert (p3.content, p3.config, p3.model, p3.approval_mode) == (
        "text p3",
        {"generation": {"temperature": 0.5}},
        "m2",
        "ask",
    )
    assert (late_a.approval_mode, late_a.model, late_a.config) == ("full", None, None)
    assert state.running_message_ids == ["run"]
    assert (state.paused, state.next_order, state.seq_reserved) == (True, 7, 3000)


def test_load_state_refuses_an_older_owner_and_a_missing_session() -> None:
    from chat.store import Fenced, load_state

    session = _session()
    assert load_state(session.id, seq_block=1000, token=5).seq_reserved == 0
    assert Session.objects.get(id=session.id).owner_token == 5
    with pytest.raises(Fenced):
        load_state(session.id, seq_block=1000, token=4)
    assert Session.objects.get(id=session.id).seq_reserved == 1000  # the refused claim reserved nothing
    assert load_state(session.id, seq_block=1000, token=6).seq_reserved == 1000
    with pytest.raises(Session.DoesNotExist):
        load_state("no-such-session", seq_block=1000)


def test_select_row_loads_what_the_orm_loads() -> None:
    session = _session()
    Session.objects.filter(id=session.id).update(paused=True, archived_at=timezone.now(), title="t ✓")
    insert_row(
        Message,
        session_id=session.id,
        message_id="m",
        role=Message.Role.ASSISTANT,
        tool_calls=[{"id": "c"}],
        entered_at=timezone.now(),
    )
    key, _ = api_key_create(user=session.user, name="k", expires_at=timezone.now() + dt.timedelta(days=1))

    for model, where in (
        (Session, {"id": session.id}),
        (Message, {"session_id": session.id, "message_id": "m"}),
        (ApiKey, {"key_hash": key.key_hash}),  # the key check of every request and handshake
        (User, {"id": session.user_id}),
    ):
        raw, orm = db.select_row(model, **where), model.objects.get(**where)
        assert raw is not None and raw.pk == orm.pk and not raw._state.adding
        assert {f.attname: getattr(raw, f.attname) for f in model._meta.concrete_fields} == {
            f.attname: getattr(orm, f.attname) for f in model._meta.concrete_fields
        }
    assert db.select_row(Session, id=session.id, user_id=session.user_id + 1) is None
