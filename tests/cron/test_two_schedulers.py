"""Two real `manage.py runscheduler` processes on one Postgres database fire every due run exactly once,
and SIGTERM stops each of them cleanly (docs/protocol.md §2 "Every due run executes exactly once", §5).

Needs Postgres (SQLite serialises every writer, so it would prove nothing): DATABASE_URL when it points at
Postgres, else the local default of `make test-services`. Skipped when none answers; with
AGENTSITE_REQUIRE_SERVICES=1 (CI) that is a failure instead.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import services_required
from tests.support.server import ROOT, server_env

pytestmark = pytest.mark.services_rerun

JOBS = 40
LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432/test"

SETUP = f"""
import datetime as dt
from django.contrib.auth import get_user_model
from django.utils import timezone
from cron import services
from cron.models import CronJob
owner = get_user_model().objects.create_user(username="alice")
for index in range({JOBS}):
    services.job_create(owner=owner, data={{
        "name": f"job{{index}}",
        "schedule": {{"type": "interval", "every_seconds": 3600}},
        "task_type": "text",
        "text": f"note {{index}}",
        "dispatch": {{"target": {{"session_id": f"s{{index}}"}}}},
    }})
CronJob.objects.update(next_run_at=timezone.now() - dt.timedelta(seconds=1))
"""


def postgres_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    candidate = url if url.startswith(("postgres://", "postgresql://")) else LOCAL_POSTGRES
    try:
        import psycopg

        with psycopg.connect(candidate.replace("postgres://", "postgresql://", 1), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        message = f"Postgres at {candidate} does not answer: {exc}"
        if services_required():
            pytest.fail(message)
        pytest.skip(message)
    return candidate


def run_counts(database_url: str) -> list[tuple[str, int, int]]:
    """(job id, runs, finished successful runs) per job."""
    import psycopg

    with psycopg.connect(database_url.replace("postgres://", "postgresql://", 1)) as conn:
        rows = conn.execute(
            "SELECT j.id, count(r.id), count(r.id) FILTER (WHERE r.status = 'success') "
            "FROM cron_cronjob j LEFT JOIN cron_cronrun r ON r.job_id = j.id GROUP BY j.id"
        ).fetchall()
    return [(str(job_id), int(runs), int(done)) for job_id, runs, done in rows]


def start_scheduler(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[str], Any]:
    handle = log.open("w")
    process = subprocess.Popen(
        [sys.executable, "manage.py", "runscheduler", "--interval", "0.1"],
        cwd=ROOT,
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    return process, handle


def test_two_scheduler_processes_fire_each_due_run_once_and_stop_on_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", postgres_url())
    with server_env(tmp_path) as env:  # a database of its own, migrated
        env.manage("shell", "-c", SETUP)
        database_url = env.env["DATABASE_URL"]
        processes = [start_scheduler(env.env, tmp_path / f"scheduler{n}.log") for n in (1, 2)]
        try:
            deadline = time.monotonic() + 60
            while sum(done for _, _, done in run_counts(database_url)) < JOBS:
                assert time.monotonic() < deadline, [p.read_text() for p in tmp_path.glob("*.log")]
                assert all(p.poll() is None for p, _ in processes), "a scheduler exited early"
                time.sleep(0.1)
            time.sleep(0.5)  # both keep ticking: nothing may fire a second time
            counts = run_counts(database_url)
        finally:
            for process, _ in processes:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGTERM)
            codes = [process.wait(timeout=20) for process, _ in processes]
            for _, handle in processes:
                handle.close()

        assert len(counts) == JOBS
        assert {(runs, done) for _, runs, done in counts} == {(1, 1)}, counts
        assert codes == [0, 0]
        logs = [(tmp_path / f"scheduler{n}.log").read_text() for n in (1, 2)]
        assert all("scheduler stopped" in log for log in logs), logs
        claims = [log.count(": run ") for log in logs]
        assert sum(claims) == JOBS, claims
