"""Cron job pages (list + form with the schedule in words, job history) and the inbox."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from pydantic import ValidationError

from agents.models import Agent
from chat.services import session_list_for_user
from cron.exceptions import CronError
from cron.inbox import inbox_list_for_user
from cron.schedule import describe, upcoming
from cron.services import (
    job_get_for_user,
    job_list_for_user,
    job_schedule,
    run_list_for_job,
)
from cron.specs import ScheduleSpec
from portal.access import AuthenticatedHttpRequest

UPCOMING = 5
COMMON_TIMEZONES = (
    "UTC",
    "Europe/London",
    "Europe/Berlin",
    "America/New_York",
    "America/Los_Angeles",
    "Asia/Tokyo",
)


def _schedule_view(spec: ScheduleSpec, *, anchor: dt.datetime) -> dict[str, Any]:
    now = timezone.now()
    return {
        "description": describe(spec),
        "next": [t.isoformat() for t in upcoming(spec, now=now, anchor=anchor, count=UPCOMING)],
    }


def _job_row(job: Any) -> dict[str, Any]:
    row = job.to_dict()
    try:
        row["schedule_view"] = _schedule_view(job_schedule(job), anchor=job.created_at)
    except (ValidationError, ValueError):
        row["schedule_view"] = {"description": "(schedule cannot be read)", "next": []}
    return row


@login_required
def cron(request: AuthenticatedHttpRequest) -> HttpResponse:
    context = {
        "jobs": [_job_row(job) for job in job_list_for_user(user=request.user)],
        "agents": Agent.objects.order_by("name"),
        "sessions": session_list_for_user(user=request.user).filter(status="open")[:50],
        "timezones": COMMON_TIMEZONES,
        "nav": "cron",
    }
    return render(request, "portal/cron.html", context)


@login_required
def cron_job(request: AuthenticatedHttpRequest, job_id: str) -> HttpResponse:
    try:
        job = job_get_for_user(user=request.user, job_id=job_id)
    except CronError:
        raise Http404("Job not found") from None
    runs = run_list_for_job(job=job)[:50]
    row = _job_row(job)
    target = (job.dispatch or {}).get("target", {}).get("session_id")
    session = session_list_for_user(user=request.user).filter(id=target).first() if target else None
    # The chat by its title, not its id; a job's own chat is made at its first run (docs/protocol.md §2).
    row["target_title"] = (session.title or "Untitled chat") if session is not None else ""
    return render(request, "portal/cron_job.html", {"job": row, "runs": runs, "nav": "cron"})


@login_required
def cron_preview(request: HttpRequest) -> JsonResponse:
    """The job form's live preview: `?type=cron&cron=…&timezone=…` → the schedule in words + next runs."""
    raw: dict[str, Any] = {
        "type": request.GET.get("type", "cron"),
        "timezone": request.GET.get("timezone") or "UTC",
    }
    field = {"cron": "cron", "interval": "every_seconds", "once": "run_at"}.get(raw["type"])
    try:
        if field is not None and request.GET.get(field):
            raw[field] = int(request.GET[field]) if field == "every_seconds" else request.GET[field]
        spec = ScheduleSpec.model_validate(raw)
        return JsonResponse({"ok": True, **_schedule_view(spec, anchor=timezone.now())})
    except ValidationError as exc:
        message = "; ".join(str(err["msg"]).removeprefix("Value error, ") for err in exc.errors())
        return JsonResponse({"ok": False, "error": message})
    except ValueError as exc:
        return JsonResponse({"ok": False, "error": str(exc)})


@login_required
def inbox(request: AuthenticatedHttpRequest) -> HttpResponse:
    unread_only = request.GET.get("unread") == "1"
    items = inbox_list_for_user(user=request.user, unread_only=unread_only)[:200]
    return render(request, "portal/inbox.html", {"items": items, "unread_only": unread_only, "nav": "inbox"})
