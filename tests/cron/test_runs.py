"""Cron runs executed for real in this test's event loop: the real runtime, the fake model over HTTP, the
real session queue and sockets (docs/protocol.md §2 "Cron jobs and inbox", §3.5).

The seed's cron flow over REST: an agent job that never fires by itself, run now, poll its history until
`success`, then find the answer in the target session and in the inbox; a model that answers 500 gives a
`failure` and an error item. Also: timeouts, unattended approvals, dispatch mode `final`, text jobs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from agentsite.dev.fake_llm import Reply
from chat.live import live_sessions
from cron import runner, services
from cron.models import CronRun, InboxItem
from cron.scheduler import Scheduler
from tests import factories
from tests.support.sandboxes import workspace_of
from tests.support.ws import connect, receive_until

pytestmark = pytest.mark.django_db(transaction=True)

JOBS = "/api/v1/cron/jobs"
NEVER = "0 0 1 1 *"
WRITE = {"tool_calls": [{"name": "write_file", "arguments": {"path": "report.txt", "content": "done"}}]}


@pytest.fixture(autouse=True)
async def no_run_left_behind() -> Any:
    yield
    await runner.cancel_runs()


def agent_spec(
    name: str, *, text: str = "Summarise the news", mode: str = "stream", **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "enabled": True,
        "schedule": {"type": "cron", "cron": NEVER, "timezone": "UTC"},
        "task_type": "agent",
        "request": {
            "input": [{"role": "user", "type": "message", "content": [{"type": "text", "text": text}]}]
        },
        "dispatch": {
            "type": "channel",
            "channel": "console",
            "target": {"session_id": f"console:{name}-sess"},
            "mode": mode,
        },
        "save_result_to_inbox": True,
    }
    body.update(extra)
    return body


async def call(client: Any, method: str, path: str, body: Any = None) -> Any:
    if body is None:
        return await sync_to_async(getattr(client, method))(path)
    return await sync_to_async(getattr(client, method))(path, body)


async def until(check: Callable[[], Any], *, within: float = 10.0) -> Any:
    """Poll a (sync, ORM-reading) check until it returns something truthy."""
    deadline = time.monotonic() + within
    while True:
        value = await sync_to_async(check)()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def create_job(client: Any, body: dict[str, Any]) -> str:
    response = await call(client, "post", JOBS, body)
    assert response.status_code == 200, response.content
    return str(response.json()["id"])


async def run_now(client: Any, job_id: str) -> str:
    response = await call(client, "post", f"{JOBS}/{job_id}/run")
    assert response.status_code == 202, response.content
    return str(response.json()["run_id"])


async def finished_history(client: Any, job_id: str) -> list[dict[str, Any]]:
    def check() -> list[dict[str, Any]] | None:
        runs = client.get(f"{JOBS}/{job_id}/history").json()["results"]
        return runs if runs and runs[0]["status"] != "running" else None

    return list(await until(check))


# --- the seed's flow ------------------------------------------------------------------------------


async def test_run_now_succeeds_and_the_answer_is_in_the_session_and_the_inbox(api, alice_key, llm):  # type: ignore[no-untyped-def]
    llm.script(Reply(text="Three things happened today."))
    client = api(alice_key)
    job_id = await create_job(client, agent_spec("news"))

    run_id = await run_now(client, job_id)
    history = await finished_history(client, job_id)

    run = history[0]
    assert run["run_id"] == run_id and run["job_id"] == job_id and run["trigger"] == "manual"
    assert run["status"] == "success", run
    assert run["response"] == "Three things happened today." and run["error"] is None
    assert run["finished_at"] >= run["started_at"]
    messages = (await call(client, "get", "/api/v1/chat/sessions/console:news-sess/messages")).json()[
        "results"
    ]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "Summarise the news"),
        ("assistant", "Three things happened today."),
    ]
    session = (await call(client, "get", "/api/v1/chat/sessions/console:news-sess")).json()
    assert session["agent_name"] == "default" and session["title"] == "news"
    inbox = (await call(client, "get", "/api/v1/inbox")).json()["results"]
    assert len(inbox) == 1
    item = inbox[0]
    assert (item["source_type"], item["severity"], item["read"]) == ("cron", "info", False)
    assert item["body"] == "Three things happened today." and item["title"] == "news"
    assert item["payload"] == {"job_id": job_id, "run_id": run_id, "session_id": "console:news-sess"}
    job = (await call(client, "get", f"{JOBS}/{job_id}")).json()
    assert job["last_status"] == "success" and job["last_run_at"] == run["started_at"]


async def test_a_model_error_is_a_failure_with_an_error_item_in_the_inbox(api, alice_key, llm):  # type: ignore[no-untyped-def]
    llm.script(*[Reply(status=500, error_message="model overloaded", retry_after_ms=1)] * 3)
    client = api(alice_key)
    job_id = await create_job(client, agent_spec("broken", save_result_to_inbox=False))

    run_id = await run_now(client, job_id)
    run = (await finished_history(client, job_id))[0]

    assert run["status"] == "failure", run
    assert "model overloaded" in run["error"]
    item = (await call(client, "get", "/api/v1/inbox")).json()["results"][0]
    assert item["severity"] == "error" and item["status"] == "failure"
    assert item["body"] == run["error"] and item["payload"]["run_id"] == run_id


async def test_a_successful_run_adds_nothing_to_the_inbox_when_asked_not_to(api, alice_key, llm):  # type: ignore[no-untyped-def]
    llm.script(Reply(text="quiet"))
    client = api(alice_key)
    job_id = await create_job(client, agent_spec("quiet", save_result_to_inbox=False))

    await run_now(client, job_id)

    assert (await finished_history(client, job_id))[0]["status"] == "success"
    assert not await sync_to_async(InboxItem.objects.exists)()


# --- timeouts and delivery errors -----------------------------------------------------------------


async def test_a_run_that_exceeds_its_timeout_fails_and_its_turn_is_cancelled(api, alice_key, llm):  # type: ignore[no-untyped-def]
    llm.script(Reply(text="too late", delay=5))
    client = api(alice_key)
    job_id = await create_job(client, agent_spec("slow", timeout_seconds=1))

    await run_now(client, job_id)
    await runner.wait_runs()

    run = await sync_to_async(CronRun.objects.get)(job_id=job_id)
    assert run.status == "failure" and run.error == "timed out after 1 s"
    controller = await live_sessions().controller("console:slow-sess")
    assert controller.active_task is None, "the timed-out turn was cancelled"
    item = await sync_to_async(InboxItem.objects.get)()
    assert item.severity == "error" and "timed out" in item.body


async def test_a_target_session_taken_by_another_user_before_the_run_is_an_error(api, alice_key, bob, llm):  # type: ignore[no-untyped-def]
    client = api(alice_key)
    job_id = await create_job(client, agent_spec("hijacked"))
    await sync_to_async(factories.session)(bob, session_id="console:hijacked-sess")

    await run_now(client, job_id)
    await runner.wait_runs()

    run = await sync_to_async(CronRun.objects.get)(job_id=job_id)
    assert (
        run.status == "error"
        and run.error == "session 'console:hijacked-sess' is not an open session of yours"
    )
    assert (await sync_to_async(InboxItem.objects.get)()).severity == "error"
    assert llm.chat_requests == []


# --- unattended approvals -------------------------------------------------------------------------


@override_settings(AGENTSITE_CONFIRMATION_TIMEOUT=0.1)
async def test_an_unattended_dangerous_call_waits_and_the_inbox_points_to_the_confirmation(
    api, alice_key, llm
):  # type: ignore[no-untyped-def]
    llm.script(Reply(**WRITE), Reply(text="Report written."))
    client = api(alice_key)
    job_id = await create_job(client, agent_spec("report", timeout_seconds=30))

    run_id = await run_now(client, job_id)
    item = await until(lambda: InboxItem.objects.filter(source_type="approval").first())

    assert item.status == "pending" and item.severity == "warning"
    session_id = item.payload["session_id"]
    confirmation_id = item.payload["confirmation_id"]
    assert (session_id, item.payload["run_id"], item.payload["job_id"]) == (
        "console:report-sess",
        run_id,
        job_id,
    )
    assert item.source_id == confirmation_id and item.payload["tool"] == "write_file"
    await asyncio.sleep(0.3)  # longer than AGENTSITE_CONFIRMATION_TIMEOUT: the run uses its job's timeout
    session = (await call(client, "get", f"/api/v1/chat/sessions/{session_id}")).json()
    assert [c["confirmation_id"] for c in session["snapshot"]["confirmations"]] == [confirmation_id]

    reply = await call(
        client,
        "post",
        f"/api/v1/chat/sessions/{session_id}/confirmations/{confirmation_id}",
        {"approved": True},
    )
    assert reply.status_code == 200, reply.content
    await runner.wait_runs()

    run = await sync_to_async(CronRun.objects.get)(id=run_id)
    assert run.status == "success" and run.response == "Report written."
    assert (await sync_to_async(workspace_of)(session_id) / "report.txt").read_text() == "done"
    await sync_to_async(item.refresh_from_db)()
    assert item.status == "approved"


async def test_a_watched_session_gets_the_confirmation_and_no_approval_item(api, alice, alice_key, llm):  # type: ignore[no-untyped-def]
    llm.script(Reply(**WRITE), Reply(text="Not written."))
    client = api(alice_key)
    job_id = await create_job(client, agent_spec("watched"))
    await sync_to_async(factories.session)(alice, session_id="console:watched-sess")
    ws, _ = await connect("console:watched-sess", key=alice_key)

    await run_now(client, job_id)
    request, _ = await receive_until(ws, "confirmation_request")
    await ws.send_json_to(
        {
            "type": "confirmation_reply",
            "confirmation_id": request["data"]["confirmation_id"],
            "approved": False,
        }
    )
    await receive_until(ws, "result")
    await runner.wait_runs()

    assert (await sync_to_async(CronRun.objects.get)(job_id=job_id)).status == "success"
    assert not await sync_to_async(InboxItem.objects.filter(source_type="approval").exists)()
    await ws.disconnect()


# --- what the session's sockets see ----------------------------------------------------------------


async def test_dispatch_mode_final_sends_the_final_answer_without_deltas(api, alice, alice_key, llm):  # type: ignore[no-untyped-def]
    llm.script(Reply(text="one two three four five"))
    client = api(alice_key)
    job_id = await create_job(client, agent_spec("final", mode="final"))
    await sync_to_async(factories.session)(alice, session_id="console:final-sess")
    ws, _ = await connect("console:final-sess", key=alice_key)

    await run_now(client, job_id)
    final, before = await receive_until(ws, "final_answer")
    result, _ = await receive_until(ws, "result")

    assert final["content"] == "one two three four five"
    assert result["data"]["status"] == "completed"
    assert [f["type"] for f in before] == ["message_status"]  # started, then nothing streamed
    await ws.disconnect()


async def test_dispatch_mode_stream_shows_the_run_like_a_user_message(api, alice, alice_key, llm):  # type: ignore[no-untyped-def]
    llm.script(Reply(text="one two three"))
    client = api(alice_key)
    job_id = await create_job(client, agent_spec("stream"))
    await sync_to_async(factories.session)(alice, session_id="console:stream-sess")
    ws, _ = await connect("console:stream-sess", key=alice_key)

    run_id = await run_now(client, job_id)
    started, _ = await receive_until(ws, "message_status")
    final, before = await receive_until(ws, "final_answer")

    assert started["status"] == "started" and started["message_id"] == f"cron-{run_id}"
    assert "".join(f["content"] for f in before if f["type"] == "delta") == "one two three"
    assert final["message_id"] == f"cron-{run_id}"
    await ws.disconnect()


async def test_a_text_job_adds_an_assistant_message_that_watchers_see(api, alice, alice_key):  # type: ignore[no-untyped-def]
    client = api(alice_key)
    body = {**agent_spec("memo"), "task_type": "text", "text": "Stand-up in 5 minutes"}
    del body["request"]
    job_id = await create_job(client, body)
    await sync_to_async(factories.session)(alice, session_id="console:memo-sess")
    ws, _ = await connect("console:memo-sess", key=alice_key)

    run_id = await run_now(client, job_id)
    event, _ = await receive_until(ws, "final_answer")
    await runner.wait_runs()

    assert event["content"] == "Stand-up in 5 minutes" and event["seq"] > 0
    # rendered as a turn's answer is (chat/live/outcomes.py final_answer)
    assert event["html"].strip() == "<p>Stand-up in 5 minutes</p>"
    messages = (await call(client, "get", "/api/v1/chat/sessions/console:memo-sess/messages")).json()[
        "results"
    ]
    assert [(m["role"], m["content"], m["message_id"]) for m in messages] == [
        ("assistant", "Stand-up in 5 minutes", f"cron-{run_id}")
    ]
    run = await sync_to_async(CronRun.objects.get)(id=run_id)
    assert run.status == "success" and run.response == "Stand-up in 5 minutes"
    await ws.disconnect()


# --- the scheduler loop -----------------------------------------------------------------------------


async def test_a_scheduler_tick_runs_the_due_job_and_stop_cancels_runs_in_progress(alice, llm):  # type: ignore[no-untyped-def]
    llm.script(Reply(text="slow answer", delay=5))
    job = await sync_to_async(services.job_create)(owner=alice, data=agent_spec("ticked"))
    scheduler = Scheduler(clock=lambda: job.next_run_at)  # the fake clock says: it is due now

    assert await scheduler.tick() is True
    assert await scheduler.tick() is False  # claimed once
    await until(lambda: llm.chat_requests)
    await scheduler.stop()

    run = await sync_to_async(CronRun.objects.get)(job_id=job.id)
    assert run.trigger == "schedule" and run.status == "cancelled"
    controller = await live_sessions().controller("console:ticked-sess")
    assert controller.active_task is None
