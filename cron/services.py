"""Writes and lookups for cron jobs and their runs (`<entity>_<action>`, keyword-only, typed).

Views, admin actions, the scheduler and the runner call these; they hold every rule that touches the
database: ownership, the checks a JOB needs beyond its shape, claiming a due run exactly once, opening
a run (or recording it `skipped`), finishing a run and the inbox item that follows from it. The inbox
itself (listing, reading, the approval items of unattended runs) is cron/inbox.py.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from agents.models import DEFAULT_AGENT, Agent
from agentsite.exceptions import DomainError, check_limit
from audit.actions import CRON_JOB_CREATE, CRON_JOB_DELETE, CRON_JOB_UPDATE, CRON_RUN
from audit.context import SYSTEM
from audit.services import audit_record
from chat.exceptions import SessionClosed, SessionExists, SessionNotFound
from chat.models import Message, Session
from chat.services import session_get_or_create_open
from chat.statuses import MessageStatus
from cron.exceptions import DeliveryError, JobNotFound
from cron.inbox import inbox_item_create
from cron.models import CronJob, CronRun, InboxItem
from cron.schedule import due_and_next, next_run_at
from cron.specs import (
    DispatchSpec,
    JobSpec,
    ScheduleSpec,
    SpecError,
    parse_job,
    parse_spec,
    validate_not_past,
)

logger = logging.getLogger(__name__)

# A `running` row older than its job's timeout plus this belongs to a process that died mid-run.
STALE_RUN_GRACE = dt.timedelta(seconds=60)


def _now(now: dt.datetime | None) -> dt.datetime:
    return now if now is not None else timezone.now()


# --------------------------------------------------------------------------------------------------
# Jobs
# --------------------------------------------------------------------------------------------------


def job_list_for_user(*, user: User) -> QuerySet[CronJob]:
    return CronJob.objects.filter(owner=user)


def job_get_for_user(*, user: User, job_id: str) -> CronJob:
    """The user's job; another user's job is reported exactly like a missing one."""
    job = CronJob.objects.filter(id=job_id, owner=user).first()
    if job is None:
        raise JobNotFound(f"Cron job {job_id} not found")
    return job


@transaction.atomic
def job_create(*, owner: User, data: Any, now: dt.datetime | None = None) -> CronJob:
    """Validate a JOB body for `owner` and store it; raises SpecError (→ 400 with `fields`)."""
    now = _now(now)
    limit = settings.AGENTSITE_USER_MAX_CRON_JOBS
    jobs = CronJob.objects.filter(owner=owner).count()
    check_limit(jobs, limit, what="cron jobs", setting="AGENTSITE_USER_MAX_CRON_JOBS")
    spec = parse_job(data)
    _check_for_owner(owner=owner, spec=spec, now=now, check_past=True)
    job = CronJob(owner=owner, created_at=now)
    _apply(job, spec)
    job.next_run_at = _first_run(job, spec.schedule, now) if job.enabled else None
    job.save()
    _audit_job(CRON_JOB_CREATE, job, "created", {"schedule": job.schedule, "agent": job.agent_name})
    return job


@transaction.atomic
def job_update(*, job: CronJob, data: Any, partial: bool, now: dt.datetime | None = None) -> CronJob:
    """PUT (replace) or PATCH (top-level keys merged into the stored JOB; nested objects replaced whole)."""
    now = _now(now)
    if partial:
        if not isinstance(data, dict):
            raise SpecError({"non_field_errors": ["must be a JSON object"]})
        data = {**job.to_dict(), **data}
    spec = parse_job(data)
    schedule_changed = spec.schedule.to_json() != job.schedule
    _check_for_owner(owner=job.owner, spec=spec, now=now, check_past=schedule_changed)
    was_enabled = job.enabled
    before = job.to_dict()
    _apply(job, spec)
    if not job.enabled:
        job.next_run_at = None
    elif schedule_changed or not was_enabled:
        job.next_run_at = _first_run(job, spec.schedule, now)
    job.save()
    after = job.to_dict()
    changed = [key for key in _JOB_KEYS if before.get(key) != after.get(key)]
    if changed:
        _audit_job(CRON_JOB_UPDATE, job, f"changed: {', '.join(changed)}", {"changed": changed})
    return job


# What a job's `cron.job_update` entry compares: the keys of a JOB a client writes.
_JOB_KEYS = tuple(
    "name enabled agent schedule task_type request text dispatch save_result_to_inbox timeout_seconds".split()
)


@transaction.atomic
def job_delete(*, job: CronJob) -> None:
    """Delete the job and its history; a run in progress goes on in its session (its row is gone)."""
    _audit_job(CRON_JOB_DELETE, job, "deleted", {"schedule": job.schedule, "agent": job.agent_name})
    job.delete()


@transaction.atomic
def job_pause(*, job: CronJob) -> CronJob:
    """Stored: no scheduler claims it until it is resumed (a run in progress finishes)."""
    paused = CronJob.objects.filter(id=job.id, enabled=True).update(
        enabled=False, next_run_at=None, updated_at=timezone.now()
    )
    job.refresh_from_db()
    if paused:
        _audit_job(CRON_JOB_UPDATE, job, "paused", {"changed": ["enabled"]})
    return job


@transaction.atomic
def job_resume(*, job: CronJob, now: dt.datetime | None = None) -> CronJob:
    """Enable again; the next run is the first one after now (times missed while paused do not fire)."""
    now = _now(now)
    spec = job_schedule(job)
    was_enabled = job.enabled
    CronJob.objects.filter(id=job.id).update(
        enabled=True, next_run_at=_first_run(job, spec, now), updated_at=timezone.now()
    )
    job.refresh_from_db()
    if not was_enabled:
        _audit_job(CRON_JOB_UPDATE, job, "resumed", {"changed": ["enabled"]})
    return job


def _audit_job(action: str, job: CronJob, what: str, details: dict[str, Any]) -> None:
    audit_record(
        action,
        object_type="cron_job",
        object_id=job.id,
        summary=f"cron job '{job.name}' {what}",
        details={"name": job.name, "owner": str(job.owner_id), **details},
    )


def job_schedule(job: CronJob) -> ScheduleSpec:
    return parse_spec(ScheduleSpec, job.schedule, prefix="schedule")


def job_dispatch(job: CronJob) -> DispatchSpec:
    return parse_spec(DispatchSpec, job.dispatch, prefix="dispatch")


def _first_run(job: CronJob, spec: ScheduleSpec, now: dt.datetime) -> dt.datetime | None:
    return next_run_at(spec, after=now, anchor=job.created_at)


def _apply(job: CronJob, spec: JobSpec) -> None:
    job.name = spec.name
    job.enabled = spec.enabled
    job.agent_name = spec.agent
    job.schedule = spec.schedule.to_json()
    job.task_type = spec.task_type
    is_agent = spec.task_type == CronJob.TaskType.AGENT
    job.request = spec.request.model_dump(mode="json") if is_agent and spec.request else None
    job.text = None if is_agent else spec.text
    job.dispatch = spec.dispatch.model_dump(mode="json", exclude_none=True)
    job.save_result_to_inbox = spec.save_result_to_inbox
    job.timeout_seconds = spec.timeout_seconds


def _check_for_owner(*, owner: User, spec: JobSpec, now: dt.datetime, check_past: bool) -> None:
    """The checks that need the database (or the clock), all reported at once."""
    fields: dict[str, list[str]] = {}
    if check_past:
        try:
            validate_not_past(spec.schedule, now)
        except SpecError as exc:
            fields.update(exc.fields)
    if spec.agent != DEFAULT_AGENT and not Agent.objects.filter(name=spec.agent).exists():
        fields["agent"] = [f"unknown agent '{spec.agent}'"]
    target = spec.dispatch.target
    if target.user_id is not None and target.user_id not in _owner_ids(owner):
        fields["dispatch.target.user_id"] = ["must be the job's owner (your user id or username)"]
    session = Session.objects.filter(id=target.session_id).first()
    if session is not None and (session.user_id != owner.pk or not session.is_open):
        # One sentence for another user's session and a closed one of yours: says nothing about whose.
        fields["dispatch.target.session_id"] = [_NOT_YOURS.format(target.session_id)]
    if fields:
        raise SpecError(fields)


_NOT_YOURS = "session '{}' is not an open session of yours"


def _owner_ids(owner: User) -> set[str]:
    return {str(owner.pk), owner.get_username()}


# --------------------------------------------------------------------------------------------------
# Runs: opening, claiming, finishing
# --------------------------------------------------------------------------------------------------


def run_list_for_job(*, job: CronJob) -> QuerySet[CronRun]:
    return CronRun.objects.filter(job=job)


def run_start_manual(*, job: CronJob, now: dt.datetime | None = None) -> CronRun:
    """`POST …/run`: a `running` run to execute now, or a `skipped` one when a run is still going."""
    with transaction.atomic():
        return _open_run(job=job, trigger=CronRun.Trigger.MANUAL, scheduled_for=None, now=_now(now))


def run_claim_due(*, job_id: str, seen: dt.datetime, now: dt.datetime) -> CronRun | None:
    """Claim the run due at `seen` for this scheduler, or None when it is not due or another one won.

    The claim is one conditional UPDATE (`WHERE id=… AND enabled AND next_run_at=<seen>`) that moves
    next_run_at on; only the process whose UPDATE changed the row (rowcount 1) opens the run, in the same
    transaction, so a claimed run is never lost between the two writes.
    """
    with transaction.atomic():
        job = CronJob.objects.filter(id=job_id, enabled=True, next_run_at=seen).first()
        if job is None:
            return None
        try:
            spec = job_schedule(job)
        except SpecError as exc:
            logger.error("cron job %s has an unreadable schedule (%s): it is paused", job_id, exc)
            CronJob.objects.filter(id=job_id, next_run_at=seen).update(enabled=False, next_run_at=None)
            return None
        due, following = due_and_next(spec, now=now, next_run_at=seen, anchor=job.created_at)
        if not due:
            return None
        won = CronJob.objects.filter(id=job_id, enabled=True, next_run_at=seen).update(next_run_at=following)
        if won != 1:
            return None
        job.next_run_at = following
        return _open_run(job=job, trigger=CronRun.Trigger.SCHEDULE, scheduled_for=seen, now=now)


def due_job_candidates(*, now: dt.datetime, limit: int = 100) -> list[tuple[str, dt.datetime]]:
    """(job id, next_run_at) of enabled jobs due at `now`, earliest first: what a scheduler tries to claim."""
    rows = (
        CronJob.objects.filter(enabled=True, next_run_at__lte=now)
        .order_by("next_run_at", "id")
        .values_list("id", "next_run_at")[:limit]
    )
    return [(job_id, seen) for job_id, seen in rows if seen is not None]


def _open_run(*, job: CronJob, trigger: str, scheduled_for: dt.datetime | None, now: dt.datetime) -> CronRun:
    """A `running` run, or a `skipped` one when the previous run is still going (in a transaction)."""
    run_expire_stale(job=job, now=now)
    run_id = uuid.uuid4().hex
    try:
        with transaction.atomic():  # a savepoint: the unique "one running run per job" index decides
            run = CronRun.objects.create(
                id=run_id,
                job=job,
                trigger=trigger,
                status=CronRun.Status.RUNNING,
                scheduled_for=scheduled_for,
                started_at=now,
                session_id=_target_session_id(job),
                message_id=f"cron-{run_id}",
            )
    except IntegrityError:
        skipped = CronRun.objects.create(
            id=run_id,
            job=job,
            trigger=trigger,
            status=CronRun.Status.SKIPPED,
            scheduled_for=scheduled_for,
            started_at=now,
            finished_at=now,
            error="a run of this job was still going",
            session_id=_target_session_id(job),
        )
        _audit_run(job, skipped)
        return skipped
    CronJob.objects.filter(id=job.id).update(last_run_at=now, last_status=CronRun.Status.RUNNING)
    _audit_run(job, run)
    return run


def _audit_run(job: CronJob, run: CronRun) -> None:
    """`cron.run`: a run opened (or skipped); by the user who asked for it, or by the system on schedule."""
    audit_record(
        CRON_RUN,
        object_type="cron_job",
        object_id=job.id,
        summary=f"cron job '{job.name}' run {run.id} {run.status} ({run.trigger})",
        details={
            "name": job.name,
            "owner": str(job.owner_id),
            "run_id": run.id,
            "trigger": run.trigger,
            "status": run.status,
            "session_id": run.session_id,
        },
        actor=SYSTEM if run.trigger == CronRun.Trigger.SCHEDULE else None,
    )


def _target_session_id(job: CronJob) -> str:
    target = job.dispatch.get("target") if isinstance(job.dispatch, dict) else None
    return str(target.get("session_id", "")) if isinstance(target, dict) else ""


def run_expire_stale(*, job: CronJob, now: dt.datetime) -> int:
    """End `running` rows whose process died (older than the timeout + grace): `error`, with an inbox item."""
    limit = now - dt.timedelta(seconds=job.timeout_seconds) - STALE_RUN_GRACE
    stale = list(CronRun.objects.filter(job=job, status=CronRun.Status.RUNNING, started_at__lt=limit))
    for run in stale:
        run_finish(
            run_id=run.id,
            status=CronRun.Status.ERROR,
            error="the process running it stopped before the run finished",
            now=now,
        )
    return len(stale)


def run_finish(
    *,
    run_id: str,
    status: str,
    response: str | None = None,
    error: str | None = None,
    now: dt.datetime | None = None,
) -> bool:
    """Record how a run ended (once: only a `running` row changes) and add the inbox item it calls for."""
    now = _now(now)
    with transaction.atomic():
        updated = CronRun.objects.filter(id=run_id, status=CronRun.Status.RUNNING).update(
            status=status, finished_at=now, response=response, error=error
        )
        if updated != 1:
            return False
        run = CronRun.objects.select_related("job").get(id=run_id)
        CronJob.objects.filter(id=run.job_id).update(last_status=status)
        _inbox_for_run(run)
    return True


def _inbox_for_run(run: CronRun) -> InboxItem | None:
    """The inbox item a finished run calls for (docs/protocol.md §2): failure/error → always an error
    item; success → an info item when the job asks for it."""
    job = run.job
    payload = {"job_id": job.id, "run_id": run.id, "session_id": run.session_id or None}
    if run.status in (CronRun.Status.FAILURE, CronRun.Status.ERROR):
        return inbox_item_create(
            owner_id=job.owner_id,
            source_type=InboxItem.SourceType.CRON,
            source_id=job.id,
            title=f"{job.name}: run {run.status}",
            body=run.error or "The run failed.",
            status=run.status,
            severity=InboxItem.Severity.ERROR,
            payload=payload,
        )
    if run.status == CronRun.Status.SUCCESS and job.save_result_to_inbox:
        return inbox_item_create(
            owner_id=job.owner_id,
            source_type=InboxItem.SourceType.CRON,
            source_id=job.id,
            title=job.name,
            body=run.response or "",
            status=run.status,
            severity=InboxItem.Severity.INFO,
            payload=payload,
        )
    return None


# --------------------------------------------------------------------------------------------------
# Delivery helpers for the runner (sync; the runner calls them through database_sync_to_async)
# --------------------------------------------------------------------------------------------------


def run_target_session(*, job: CronJob) -> Session:
    """The job's target session: the owner's open session with that id, created with the job's agent when
    missing, by the one get-or-create of chat (a socket's `?create=1` uses it too: a session someone makes
    at the same moment is joined, not a failure).

    At run time anything else is a delivery failure (DeliveryError → run `error`): the session belongs
    to someone else (taken after the job was saved) or is closed, or it cannot be created.
    """
    session_id = job_dispatch(job).target.session_id
    try:
        return session_get_or_create_open(
            user=job.owner, session_id=session_id, agent_name=job.agent_name, title=job.name
        )
    except (SessionNotFound, SessionClosed, SessionExists):
        raise DeliveryError(_NOT_YOURS.format(session_id)) from None
    except DomainError as exc:  # AgentNotFound, LimitReached
        raise DeliveryError(f"Could not create session {session_id}: {exc.message}") from None


def assistant_message_create(*, session_id: str, message_id: str, content: str) -> Message:
    """A text job's delivery: an assistant message in the session, part of the conversation."""
    now = timezone.now()
    return Message.objects.create(
        session_id=session_id,
        message_id=message_id,
        role=Message.Role.ASSISTANT,
        content=content,
        status=MessageStatus.COMPLETED,
        created_at=now,
        entered_at=now,
    )
