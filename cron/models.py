"""Cron jobs, their runs, and the inbox (docs/protocol.md §2 "Cron jobs and inbox").

The JSON columns (schedule, request, dispatch) hold exactly what cron/specs.py accepted, and are parsed
through those models again whenever they are read for work (docs/architecture.md: JSON columns go
through a model).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from agentsite.isotime import iso


def new_id() -> str:
    return uuid.uuid4().hex


def _iso(value: Any) -> str | None:
    return iso(value)


class CronJob(models.Model):
    class TaskType(models.TextChoices):
        AGENT = "agent"
        TEXT = "text"

    id = models.CharField(primary_key=True, max_length=64, default=new_id, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="cron_jobs")
    name = models.CharField(max_length=200)
    enabled = models.BooleanField(default=True)
    agent_name = models.CharField(max_length=64, default="default")
    schedule = models.JSONField()
    task_type = models.CharField(max_length=10, choices=TaskType.choices, default=TaskType.AGENT)
    request = models.JSONField(null=True, blank=True)
    text = models.TextField(null=True, blank=True)
    dispatch = models.JSONField()
    save_result_to_inbox = models.BooleanField(default=True)
    timeout_seconds = models.PositiveIntegerField(default=600)
    # The scheduler claims a due run by moving this forward with a conditional UPDATE (cron/scheduler.py).
    next_run_at = models.DateTimeField(null=True, blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_status = models.CharField(max_length=16, null=True, blank=True)
    # Also the anchor of an interval schedule's fixed rate.
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["enabled", "next_run_at"], name="cron_job_due"),
            models.Index(fields=["owner", "-created_at"], name="cron_job_owner_created"),
        ]

    def __str__(self) -> str:
        return self.name

    def to_dict(self) -> dict[str, Any]:
        """JOB of docs/protocol.md §2 (plus created_at/updated_at)."""
        return {
            "id": self.id,
            "name": self.name,
            "enabled": self.enabled,
            "agent": self.agent_name,
            "schedule": self.schedule,
            "task_type": self.task_type,
            "request": self.request,
            "text": self.text,
            "dispatch": self.dispatch,
            "save_result_to_inbox": self.save_result_to_inbox,
            "timeout_seconds": self.timeout_seconds,
            "next_run_at": _iso(self.next_run_at),
            "last_run_at": _iso(self.last_run_at),
            "last_status": self.last_status,
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
        }


class CronRun(models.Model):
    class Trigger(models.TextChoices):
        SCHEDULE = "schedule"
        MANUAL = "manual"

    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCESS = "success"
        FAILURE = "failure"
        ERROR = "error"
        CANCELLED = "cancelled"
        SKIPPED = "skipped"

    id = models.CharField(primary_key=True, max_length=64, default=new_id, editable=False)
    job = models.ForeignKey(CronJob, on_delete=models.CASCADE, related_name="runs")
    trigger = models.CharField(max_length=10, choices=Trigger.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    # The next_run_at value this run was claimed for (schedule trigger only).
    scheduled_for = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    response = models.TextField(null=True, blank=True)
    error = models.TextField(null=True, blank=True)
    session_id = models.CharField(max_length=128, blank=True)
    message_id = models.CharField(max_length=128, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            # At most one run of a job executes at a time, across processes: a second one is `skipped`.
            models.UniqueConstraint(
                fields=["job"], condition=Q(status="running"), name="cron_run_one_running_per_job"
            ),
            # A scheduled time is claimed once, whatever the scheduler processes did.
            models.UniqueConstraint(
                fields=["job", "scheduled_for"],
                condition=Q(scheduled_for__isnull=False),
                name="cron_run_once_per_scheduled_time",
            ),
        ]
        indexes = [models.Index(fields=["job", "-started_at"], name="cron_run_job_started")]

    def __str__(self) -> str:
        return f"{self.job_id} {self.trigger} {self.status}"

    @property
    def is_finished(self) -> bool:
        return self.status != self.Status.RUNNING

    def to_dict(self) -> dict[str, Any]:
        """RUN of docs/protocol.md §2 (plus the session and message it delivered into)."""
        return {
            "run_id": self.id,
            "job_id": self.job_id,
            "trigger": self.trigger,
            "status": self.status,
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
            "response": self.response,
            "error": self.error,
            "session_id": self.session_id or None,
            "message_id": self.message_id or None,
        }


class InboxItem(models.Model):
    class SourceType(models.TextChoices):
        CRON = "cron"
        APPROVAL = "approval"

    class Severity(models.TextChoices):
        INFO = "info"
        WARNING = "warning"
        ERROR = "error"

    id = models.CharField(primary_key=True, max_length=64, default=new_id, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="inbox_items")
    source_type = models.CharField(max_length=32, choices=SourceType.choices)
    source_id = models.CharField(max_length=128, blank=True)
    title = models.CharField(max_length=300)
    body = models.TextField(blank=True)
    status = models.CharField(max_length=16, blank=True)
    severity = models.CharField(max_length=10, choices=Severity.choices, default=Severity.INFO)
    read = models.BooleanField(default=False)
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner", "read", "-created_at"], name="inbox_owner_read_created")]

    def __str__(self) -> str:
        return self.title

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source_type": self.source_type,
            "source_id": self.source_id,
            "title": self.title,
            "body": self.body,
            "status": self.status,
            "severity": self.severity,
            "read": self.read,
            "created_at": _iso(self.created_at),
            "payload": self.payload,
        }
