"""Schedule maths: when a job runs next, what a missed run does, and the schedule in words.

All datetimes in and out are timezone-aware; results are in UTC. Plain Python (cronsim, zoneinfo,
cron-descriptor): the scheduler, the API and the portal call these with the job's stored values.

Rules
-----
- ``cron``: evaluated in the job's ``timezone`` with cronsim, which follows Debian cron across DST:
  * a job at a fixed time of day (minute and hour fields not starting with ``*``) keeps wall-clock time.
    On a spring-forward day a time inside the gap runs once, at the first minute after it (02:30 in
    Europe/Berlin on the last Sunday of March runs at 03:00 CEST); on a fall-back day a time inside
    the repeated hour runs once, at its first occurrence (02:30 CEST, not again at 02:30 CET);
  * a job with ``*`` in the minute or hour field (``*/15 * * * *``, ``0 * * * *``) follows elapsed
    time: it does not run in the skipped hour and runs in both copies of the repeated hour.
- ``interval``: fixed rate from ``anchor`` (the job's creation): runs at anchor + k·every (k ≥ 1), never
  drifting with how long runs take or how late the scheduler woke up. The timezone plays no part.
- ``once``: ``run_at`` while it is still ahead, then never again.
- Misfires: a job whose time passed while nothing was running fires once, and its next time is the
  first one after *now* (no burst of catch-up runs): see ``due_and_next``.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

from cron_descriptor import ExpressionDescriptor, Options
from cronsim import CronSim, CronSimError

from cron.specs import ScheduleSpec

__all__ = ["describe", "due_and_next", "next_run_at", "upcoming"]

# cronsim yields increasing times; a few results at or before `after` can only come from a fall-back
# repeat (see _next_cron), so this bound is never reached by a sane schedule.
_MAX_SKIPS = 8


def next_run_at(spec: ScheduleSpec, *, after: dt.datetime, anchor: dt.datetime) -> dt.datetime | None:
    """The first time strictly after ``after`` at which the job runs, in UTC; None when it never will.

    ``anchor`` is the start of an interval schedule's fixed rate (the job's creation); other types
    ignore it.
    """
    _require_aware(after=after, anchor=anchor)
    if spec.type == "cron":
        return _next_cron(spec, after)
    if spec.type == "interval":
        return _next_interval(spec, after, anchor)
    return _next_once(spec, after)


def due_and_next(
    spec: ScheduleSpec, *, now: dt.datetime, next_run_at: dt.datetime | None, anchor: dt.datetime
) -> tuple[bool, dt.datetime | None]:
    """Whether the job is due at ``now`` given its stored ``next_run_at``, and what to store next.

    Not due: the stored time is kept. Due: it fires once, however many times were missed (the
    scheduler was down, the machine slept), and the following time is the first one after ``now``.
    The scheduler writes that value with a conditional UPDATE to claim the run.
    """
    _require_aware(now=now, anchor=anchor)
    if next_run_at is None:
        return False, None
    if next_run_at > now:
        return False, next_run_at
    return True, _compute_next(spec, after=now, anchor=anchor)


def upcoming(
    spec: ScheduleSpec, *, now: dt.datetime, anchor: dt.datetime, count: int = 5
) -> list[dt.datetime]:
    """The next ``count`` run times after ``now`` (fewer when the schedule ends), for forms and lists."""
    _require_aware(now=now, anchor=anchor)
    times: list[dt.datetime] = []
    after = now
    while len(times) < count:
        following = _compute_next(spec, after=after, anchor=anchor)
        if following is None:
            break
        times.append(following)
        after = following
    return times


def describe(spec: ScheduleSpec) -> str:
    """The schedule in words: "At 08:00, Monday through Friday (Europe/Berlin)", "every 15 minutes"."""
    if spec.type == "cron":
        return f"{_describe_cron(_cron(spec))} ({spec.timezone})"
    if spec.type == "interval":
        return _describe_interval(_every(spec))
    run_at = _run_at(spec).astimezone(ZoneInfo(spec.timezone))
    shown = run_at.strftime("%Y-%m-%d %H:%M:%S" if run_at.second else "%Y-%m-%d %H:%M")
    return f"once at {shown} ({spec.timezone})"


# --------------------------------------------------------------------------------------------------


_compute_next = next_run_at  # for due_and_next, whose parameter shadows the public name


def _require_aware(**values: dt.datetime) -> None:
    for name, value in values.items():
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{name} must be a timezone-aware datetime, got {value!r}")


def _next_cron(spec: ScheduleSpec, after: dt.datetime) -> dt.datetime | None:
    """Walk cronsim from ``after`` in the job's timezone.

    cronsim iterates fixed-time jobs on naive wall-clock time, so an ``after`` inside the second
    copy of a repeated hour can yield the first copy (which is earlier in real time): skip such
    results rather than run the job twice.
    """
    zone = ZoneInfo(spec.timezone)
    try:
        times = CronSim(_cron(spec), after.astimezone(zone))
        for _ in range(_MAX_SKIPS):
            candidate = next(times).astimezone(dt.UTC)
            if candidate > after:
                return candidate
    except (StopIteration, CronSimError):  # no match within cronsim's 50-year horizon
        return None
    return None


def _next_interval(spec: ScheduleSpec, after: dt.datetime, anchor: dt.datetime) -> dt.datetime:
    every = dt.timedelta(seconds=_every(spec))
    steps = max(1, (after - anchor) // every + 1)
    return (anchor + steps * every).astimezone(dt.UTC)


def _next_once(spec: ScheduleSpec, after: dt.datetime) -> dt.datetime | None:
    run_at = _run_at(spec)
    return run_at.astimezone(dt.UTC) if run_at > after else None


def _cron(spec: ScheduleSpec) -> str:
    if spec.cron is None:
        raise ValueError("a cron schedule needs its cron string")
    return spec.cron


def _every(spec: ScheduleSpec) -> int:
    if spec.every_seconds is None:
        raise ValueError("an interval schedule needs every_seconds")
    return spec.every_seconds


def _run_at(spec: ScheduleSpec) -> dt.datetime:
    if spec.run_at is None:
        raise ValueError("a once schedule needs run_at")
    return spec.run_at


def _describe_cron(expression: str) -> str:
    """cron-descriptor in English, 24-hour clock; the raw string if it cannot read it."""
    try:
        options = Options(locale_code="en_US", use_24hour_time_format=True)
        return str(ExpressionDescriptor(expression, options).get_description())
    except Exception:  # a third-party parser: never let a description break a page or a 400
        return f"cron '{expression}'"


_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def _describe_interval(seconds: int) -> str:
    """The largest unit that divides the interval evenly: 5400 s → "every 90 minutes"."""
    for unit, size in _UNITS:
        if seconds % size == 0:
            count = seconds // size
            return f"every {unit}" if count == 1 else f"every {count} {unit}s"
    raise AssertionError("unreachable: every integer is a whole number of seconds")
