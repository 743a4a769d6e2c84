"""The scheduler's unit of work (claim the due runs) on a fake clock: claiming once, misfires, pause/resume
across scheduler instances, skipped runs, and runs left `running` by a process that died.

Claiming under two real scheduler processes on Postgres is in test_two_schedulers.py.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from cron import services
from cron.models import CronJob, CronRun, InboxItem
from cron.scheduler import Scheduler

T0 = dt.datetime(2030, 3, 4, 12, 0, tzinfo=dt.UTC)
EVERY = 60

pytestmark = pytest.mark.django_db


def interval_job(owner: Any, *, now: dt.datetime = T0, every: int = EVERY, **extra: Any) -> CronJob:
    body: dict[str, Any] = {
        "name": "tick",
        "schedule": {"type": "interval", "every_seconds": every},
        "task_type": "text",
        "text": "ping",
        "dispatch": {"target": {"session_id": "cron-target"}},
    }
    body.update(extra)
    return services.job_create(owner=owner, data=body, now=now)


def seconds(n: float) -> dt.timedelta:
    return dt.timedelta(seconds=n)


def test_a_job_is_not_claimed_before_it_is_due(alice: Any) -> None:
    job = interval_job(alice)

    assert job.next_run_at == T0 + seconds(EVERY)
    assert Scheduler().claim_due(T0 + seconds(EVERY - 1)) == []
    assert not CronRun.objects.exists()


def test_a_due_run_is_claimed_once_even_by_a_second_scheduler(alice: Any) -> None:
    job = interval_job(alice)
    due = T0 + seconds(EVERY)

    first = Scheduler().claim_due(due)
    second = Scheduler().claim_due(due)

    assert len(first) == 1 and second == []
    run = CronRun.objects.get()
    assert (run.id, run.trigger, run.status, run.scheduled_for) == (first[0], "schedule", "running", due)
    job.refresh_from_db()
    assert job.next_run_at == T0 + seconds(2 * EVERY)
    assert job.last_status == "running" and job.last_run_at == due


def test_missed_runs_fire_once_and_the_next_time_is_after_now(alice: Any) -> None:
    job = interval_job(alice)
    late = T0 + seconds(5 * EVERY + 7)  # five runs were missed while nothing was running

    claimed = Scheduler().claim_due(late)

    assert len(claimed) == 1
    job.refresh_from_db()
    assert job.next_run_at == T0 + seconds(6 * EVERY)  # fixed rate from creation, first after now
    assert Scheduler().claim_due(late + seconds(1)) == []


def test_a_once_job_fires_once_and_never_again(alice: Any) -> None:
    run_at = T0 + seconds(30)
    job = interval_job(alice, schedule={"type": "once", "run_at": run_at.isoformat()})

    assert len(Scheduler().claim_due(run_at + seconds(3600))) == 1
    job.refresh_from_db()
    assert job.next_run_at is None
    assert Scheduler().claim_due(run_at + seconds(7200)) == []


def test_pause_survives_a_new_scheduler_and_resume_does_not_catch_up(alice: Any) -> None:
    job = interval_job(alice)
    services.job_pause(job=job)

    later = T0 + seconds(10 * EVERY)
    assert Scheduler().claim_due(later) == []  # a fresh instance reads the stored state
    resumed = services.job_resume(job=CronJob.objects.get(id=job.id), now=later + seconds(1))

    assert resumed.enabled and resumed.next_run_at == T0 + seconds(11 * EVERY)
    assert Scheduler().claim_due(later + seconds(2)) == []
    assert len(Scheduler().claim_due(T0 + seconds(11 * EVERY))) == 1


def test_a_due_run_while_the_previous_one_is_going_is_recorded_skipped(alice: Any) -> None:
    job = interval_job(alice)
    running = Scheduler().claim_due(T0 + seconds(EVERY))

    again = Scheduler().claim_due(T0 + seconds(2 * EVERY))

    assert again == []  # nothing to execute...
    skipped = CronRun.objects.get(status="skipped")  # ...but the time is recorded, not lost
    assert skipped.scheduled_for == T0 + seconds(2 * EVERY) and skipped.finished_at is not None
    assert "still going" in (skipped.error or "")
    assert CronRun.objects.get(status="running").id == running[0]
    job.refresh_from_db()
    assert job.next_run_at == T0 + seconds(3 * EVERY)
    assert not InboxItem.objects.exists()  # a skipped run is neither a failure nor a result


def test_a_run_left_running_by_a_dead_process_ends_in_error_and_the_job_runs_again(alice: Any) -> None:
    job = interval_job(alice, timeout_seconds=30)
    stuck = Scheduler().claim_due(T0 + seconds(EVERY))[0]

    much_later = T0 + seconds(10 * EVERY)  # far beyond the job's timeout plus the grace period
    claimed = Scheduler().claim_due(much_later)

    assert len(claimed) == 1
    dead = CronRun.objects.get(id=stuck)
    assert dead.status == "error" and "stopped" in (dead.error or "")
    item = InboxItem.objects.get()
    assert item.severity == "error" and item.payload["run_id"] == stuck
    assert CronRun.objects.get(id=claimed[0]).status == "running"
    job.refresh_from_db()
    assert job.last_status == "running"


def test_a_finished_run_is_recorded_once(alice: Any) -> None:
    interval_job(alice)
    run_id = Scheduler().claim_due(T0 + seconds(EVERY))[0]

    assert services.run_finish(run_id=run_id, status="failure", error="boom") is True
    assert services.run_finish(run_id=run_id, status="success", response="late") is False

    run = CronRun.objects.get(id=run_id)
    assert (run.status, run.error, run.response) == ("failure", "boom", None)
    assert InboxItem.objects.count() == 1


def test_disabled_jobs_are_never_claimed(alice: Any) -> None:
    interval_job(alice, enabled=False)

    assert CronJob.objects.get().next_run_at is None
    assert Scheduler().claim_due(T0 + seconds(100 * EVERY)) == []
