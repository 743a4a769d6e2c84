"""The scheduler: a loop whose unit of work is "claim the due runs and start them" (healthchecks' sendalerts).

Any number of schedulers (the one inside `manage.py serve`, `manage.py runscheduler` processes) may run
against one database: each due run is claimed with a conditional UPDATE on the job's `next_run_at`
(cron/services.py `run_claim_due`), so exactly one of them fires it. A time missed while nothing ran fires
once (cron/schedule.py `due_and_next`). Claimed runs execute as tasks of this loop (cron/runner.py), each
bounded by its job's timeout.

Every scheduler also does the site's periodic housekeeping (`maintain`): once an hour it deletes the audit
entries past `AGENTSITE_AUDIT_RETENTION_DAYS` (audit/services.py `audit_prune`; with several
schedulers each prunes, and a second prune finds nothing to delete).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable

from django.utils import timezone

from agentsite.db import database_sync_to_async
from audit.services import audit_prune
from cron import runner, services
from cron.models import CronRun

logger = logging.getLogger("agentsite.scheduler")

Clock = Callable[[], dt.datetime]
DEFAULT_INTERVAL = 1.0
BATCH = 100
MAINTENANCE_SECONDS = 3600.0  # between two rounds of housekeeping (the audit trail's retention)


class Scheduler:
    """Claims due runs and starts them; `tick()` is the unit of work, `run()` the loop around it."""

    def __init__(self, *, interval: float = DEFAULT_INTERVAL, clock: Clock = timezone.now) -> None:
        self.interval = interval
        self.clock = clock
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._maintained_at: float | None = None  # time.monotonic() of the last housekeeping

    async def tick(self, now: dt.datetime | None = None) -> bool:
        """Claim every run due at `now` and start it; True when there was work (loop again at once)."""
        now = now or self.clock()
        # A connection the database dropped fails this call and is closed then; the next tick reconnects.
        run_ids = await database_sync_to_async(self.claim_due)(now)
        for run_id in run_ids:
            runner.spawn_run(run_id)
        await self.maintain(now)
        return bool(run_ids)

    async def maintain(self, now: dt.datetime) -> None:
        """The housekeeping, at the first tick and then once every MAINTENANCE_SECONDS: the audit trail's
        retention. A failure is logged and tried again next round; it never stops the claiming."""
        if self._maintained_at is not None and time.monotonic() - self._maintained_at < MAINTENANCE_SECONDS:
            return
        self._maintained_at = time.monotonic()
        try:
            deleted = await database_sync_to_async(audit_prune)(now=now)
        except Exception:
            logger.exception("pruning the audit trail failed")
            return
        if deleted:
            logger.info("audit trail: %d entries past the retention deleted", deleted)

    def claim_due(self, now: dt.datetime) -> list[str]:
        """Sync: claim the runs due at `now`; returns the ids to execute (skipped runs are only recorded)."""
        claimed: list[str] = []
        for job_id, seen in services.due_job_candidates(now=now, limit=BATCH):
            run = services.run_claim_due(job_id=job_id, seen=seen, now=now)
            if run is None:
                continue
            if run.status == CronRun.Status.SKIPPED:
                logger.info("cron job %s: run %s skipped, the previous one is still going", job_id, run.id)
                continue
            logger.info("cron job %s: run %s claimed (due %s)", job_id, run.id, seen.isoformat())
            claimed.append(run.id)
        return claimed

    async def run(self) -> None:
        """Tick until stopped; a failing tick is logged and retried after the interval."""
        logger.info("scheduler started (every %.1f s)", self.interval)
        while not self._stopping.is_set():
            try:
                busy = await self.tick()
            except Exception:
                logger.exception("scheduler tick failed")
                busy = False
            if busy:
                continue
            try:
                await asyncio.wait_for(self._stopping.wait(), self.interval)
            except TimeoutError:
                pass
        logger.info("scheduler stopped")

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> Scheduler:
        """Run the loop as a task of `loop` (which may not be running yet: daphne starts it later)."""
        target = loop or asyncio.get_running_loop()
        self._task = target.create_task(self.run(), name="cron-scheduler")
        return self

    async def stop(self) -> None:
        """Stop claiming, then cancel the runs in progress here; their rows end `cancelled`."""
        self._stopping.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await runner.cancel_runs()


def start_embedded_scheduler(
    loop: asyncio.AbstractEventLoop, *, interval: float = DEFAULT_INTERVAL
) -> Scheduler:
    """`manage.py serve`: the scheduler in the server's loop; `await scheduler.stop()` at shutdown."""
    return Scheduler(interval=interval).start(loop)
