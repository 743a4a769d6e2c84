"""Executing one cron run: deliver into the target chat session, wait for the outcome, record it.

An agent job's input goes into the session's queue exactly like a user message (chat.services.message_submit),
so whoever watches the session sees it run; the run then follows that message's events until its
`result`. A text job adds an assistant message. Every run is bounded by its job's timeout, and its
CronRun row is finished in a `finally`, whatever happened (docs/protocol.md §2).

Run tasks live in this process's event loop (the serving loop for `serve`, the scheduler's for
`runscheduler`); `spawn_run` keeps a reference to each so shutdown can cancel and await them.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from dataclasses import dataclass
from typing import Any

from agents.contract import InputError
from agentsite.db import database_sync_to_async
from chat.live import Signal, SubscriberQueue, live_sessions
from chat.live.commands import Cancel, Remove, Steer
from chat.live.outcomes import final_answer
from chat.models import Session
from chat.services import message_submit
from cron import inbox, services
from cron.exceptions import DeliveryError
from cron.models import CronJob, CronRun
from cron.specs import RequestSpec, parse_spec

logger = logging.getLogger(__name__)

# How often a waiting run re-checks the session when no event arrives (closed session, paused queue).
WATCH_POLL_SECONDS = 1.0

_tasks: dict[str, asyncio.Task[None]] = {}


@dataclass
class Outcome:
    status: str
    response: str | None = None
    error: str | None = None


@dataclass
class RunContext:
    """What a run needs, read once from the database before it starts."""

    run_id: str
    job: CronJob
    message_id: str
    session_id: str = ""


# --------------------------------------------------------------------------------------------------
# Background tasks
# --------------------------------------------------------------------------------------------------


def spawn_run(run_id: str) -> asyncio.Task[None]:
    """Execute the run in the background in the running loop (kept referenced until it ends)."""
    # A fresh context: when a view starts the run (async_to_sync inside a request thread), the caller's
    # context names that request's thread executor, which is gone once the view has answered.
    task = asyncio.get_running_loop().create_task(
        execute_run(run_id), name=f"cron-run:{run_id}", context=contextvars.Context()
    )
    _tasks[run_id] = task
    task.add_done_callback(lambda _: _tasks.pop(run_id, None))
    return task


async def spawn_run_async(run_id: str) -> None:
    """Sync callers: `async_to_sync(spawn_run_async)(run_id)` starts it in the outer loop."""
    spawn_run(run_id)


async def wait_runs() -> None:
    """Wait until the runs of this process have ended (tests, orderly shutdown)."""
    tasks = list(_tasks.values())
    if tasks:
        await asyncio.wait(tasks)


async def cancel_runs() -> None:
    """Cancel every run of this process and wait for their rows to be written (`cancelled`)."""
    tasks = list(_tasks.values())
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)


# --------------------------------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------------------------------


async def execute_run(run_id: str) -> None:
    """Deliver the run, bounded by the job's timeout; the CronRun row is finished in `finally`."""
    context = await database_sync_to_async(_load)(run_id)
    if context is None:
        return  # not running any more (skipped, finished, or its job was deleted)
    outcome = Outcome("error", error="internal error while running the job")
    timeout = context.job.timeout_seconds
    try:
        outcome = await asyncio.wait_for(_deliver(context), timeout=timeout)
    except TimeoutError:
        outcome = Outcome("failure", error=f"timed out after {timeout} s")
        await _abandon_message(context)
    except DeliveryError as exc:
        outcome = Outcome("error", error=exc.message)
    except asyncio.CancelledError:
        outcome = Outcome("cancelled", error="the scheduler stopped before the run finished")
        await _abandon_message(context)
        raise
    except Exception as exc:
        logger.exception("cron run %s of job %s failed", run_id, context.job.id)
        outcome = Outcome("error", error=f"internal error: {type(exc).__name__}: {exc}")
    finally:
        await database_sync_to_async(services.run_finish)(
            run_id=run_id, status=outcome.status, response=outcome.response, error=outcome.error
        )


def _load(run_id: str) -> RunContext | None:
    run = CronRun.objects.select_related("job", "job__owner").filter(id=run_id).first()
    if run is None or run.status != CronRun.Status.RUNNING:
        return None
    return RunContext(run_id=run.id, job=run.job, message_id=run.message_id or f"cron-{run.id}")


async def _deliver(context: RunContext) -> Outcome:
    job = context.job
    session = await database_sync_to_async(services.run_target_session)(job=job)
    context.session_id = session.id
    if job.task_type == CronJob.TaskType.TEXT:
        return await _deliver_text(context)
    return await _deliver_agent(context)


async def _deliver_text(context: RunContext) -> Outcome:
    """A text job: an assistant message in the session, announced to its watchers as a `final_answer`."""
    text = context.job.text or ""
    message = await database_sync_to_async(services.assistant_message_create)(
        session_id=context.session_id, message_id=context.message_id, content=text
    )
    await live_sessions().announce(
        context.session_id,
        final_answer(message.message_id, text),
    )
    return Outcome("success", response=text)


async def _deliver_agent(context: RunContext) -> Outcome:
    """Queue the job's input as a user message of the session and follow it to its `result`.

    Everything goes through the live sessions, so it works the same whichever process owns the session.
    """
    job = context.job
    request = parse_spec(RequestSpec, job.request, prefix="request")
    dispatch = services.job_dispatch(job)
    live = live_sessions()
    attachment = await live.attach(context.session_id, None)  # before submitting: no event can be missed
    snapshot = attachment.snapshot
    try:
        try:
            await message_submit(
                session_id=context.session_id,
                content=request.text(),
                message_id=context.message_id,
                # A paused, idle queue would hold the run until its timeout: start it now ("send now").
                steer=not snapshot["running"] and snapshot["paused"],
                approval_mode="ask",
                stream_events=dispatch.mode == "stream",
                confirmation_timeout=float(job.timeout_seconds),
            )
        except InputError as exc:
            raise DeliveryError(f"could not queue the job's input: {exc.message}") from None
        return await _follow(context, attachment.queue)
    finally:
        await live.detach(attachment)


async def _follow(context: RunContext, queue: SubscriberQueue) -> Outcome:
    """Read the session's events until this run's message ends; handle unattended approvals on the way."""
    while True:
        try:
            event = await asyncio.wait_for(queue.get(), WATCH_POLL_SECONDS)
        except TimeoutError:
            if await database_sync_to_async(_session_closed)(context.session_id):
                raise DeliveryError(f"session {context.session_id} was closed during the run") from None
            await _send_now_if_stuck(context)
            continue
        if isinstance(event, Signal):  # UNAVAILABLE: no more events here; the polls above watch the session
            continue
        kind = event.get("type")
        mine = event.get("message_id") == context.message_id
        if kind == "result" and mine:
            return _outcome_of(event.get("data") or {})
        if kind == "message_status" and mine and event.get("status") == "removed":
            return Outcome("cancelled", error="the job's message was removed from the session's queue")
        if kind == "confirmation_request" and await _is_active(context):
            await _on_confirmation(context, event.get("data") or {})
        elif kind == "confirmation_resolved":
            await database_sync_to_async(inbox.approval_item_resolve)(
                confirmation_id=str(event.get("confirmation_id")),
                approved=bool(event.get("approved")),
                by=str(event.get("by")),
            )
        elif kind == "result":
            await _send_now_if_stuck(context)


def _session_closed(session_id: str) -> bool:
    return Session.objects.filter(id=session_id, status=Session.Status.CLOSED).exists()


def _outcome_of(data: dict[str, Any]) -> Outcome:
    status = data.get("status")
    if status == "completed":
        return Outcome("success", response=data.get("final_content") or "")
    if status == "cancelled":
        return Outcome("cancelled", error="the run's turn was cancelled in its session")
    if status == "interrupted":
        return Outcome("failure", error="the run's turn was interrupted (the server stopped)")
    error = data.get("error") or {}
    message = error.get("message") if isinstance(error, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    reason = f"{message} ({code})" if message and code else (message or "the agent run ended with an error")
    return Outcome("failure", response=data.get("final_content") or None, error=reason)


async def _snapshot(context: RunContext) -> dict[str, Any] | None:
    try:
        snapshot, _ = await live_sessions().snapshot(context.session_id)
    except Exception:  # the owner is changing: ask again at the next poll
        return None
    return snapshot


async def _is_active(context: RunContext) -> bool:
    snapshot = await _snapshot(context)
    return snapshot is not None and snapshot["active_message_id"] == context.message_id


async def _on_confirmation(context: RunContext, data: dict[str, Any]) -> None:
    """Nobody watches the session: the owner learns from the inbox that the run waits for a decision."""
    if await live_sessions().watcher_count(context.session_id) > 0:
        return
    await database_sync_to_async(inbox.approval_item_create)(
        run_id=context.run_id, session_id=context.session_id, confirmation=data
    )


async def _send_now_if_stuck(context: RunContext) -> None:
    """The run's message waits in a paused queue with nothing running: start it (`steer`, "send now")."""
    snapshot = await _snapshot(context)
    if snapshot is None:
        return
    waiting = any(item["message_id"] == context.message_id for item in snapshot["pending"])
    if waiting and not snapshot["running"] and snapshot["paused"]:
        try:
            await live_sessions().dispatch(context.session_id, Steer(message_id=context.message_id))
        except InputError:
            pass  # it started or left the queue meanwhile: its events tell


async def _abandon_message(context: RunContext) -> None:
    """After a timeout or stop: cancel the run's turn if it is the active one, or drop it from the queue."""
    if not context.session_id or await database_sync_to_async(_session_closed)(context.session_id):
        return
    snapshot = await _snapshot(context)
    if snapshot is None:
        return
    try:
        if snapshot["active_message_id"] == context.message_id:
            await live_sessions().dispatch(context.session_id, Cancel())
        elif any(item["message_id"] == context.message_id for item in snapshot["pending"]):
            await live_sessions().dispatch(context.session_id, Remove(message_id=context.message_id))
    except InputError:
        pass
    except Exception:
        logger.exception("could not stop the turn of cron run %s", context.run_id)
