"""Model tokens per user, UTC day and model (docs/protocol.md §6.4): what each model step used is added as
the step ends (chat/store.py's recorder, in the same hand-over as its row), reported by `GET /api/v1/usage`
and the portal's usage page, and checked against `AGENTSITE_USER_DAILY_TOKENS` before a turn starts and
before each further model call of a turn (chat/runtime.py `DailyBudget`, docs/protocol.md §6.6)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Sum

from agentsite.db import table
from chat.models import Usage

MAX_DAYS = 366
_DAY = Usage._meta.get_field("day")


def today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def _tokens(usage: dict[str, Any], name: str) -> int:
    value = usage.get(name)
    return value if isinstance(value, int) and value > 0 else 0


def usage_add(*, user_id: int, model: str, usage: dict[str, Any] | None) -> None:
    """Add one model call's usage (the provider's `usage` object) to the user's day (sync)."""
    usage = usage or {}
    prompt, completion = _tokens(usage, "prompt_tokens"), _tokens(usage, "completion_tokens")
    total = _tokens(usage, "total_tokens") or prompt + completion
    day, model = today(), model[:200]
    if _add(user_id, day, model, prompt, completion, total):
        return
    try:
        with transaction.atomic():  # the first call of the day; another process may create it meanwhile
            Usage.objects.create(
                user_id=user_id,
                day=day,
                model=model,
                prompt_tokens=prompt,
                completion_tokens=completion,
                total_tokens=total,
                requests=1,
            )
    except IntegrityError:
        _add(user_id, day, model, prompt, completion, total)


def _add(user_id: int, day: dt.date, model: str, prompt: int, completion: int, total: int) -> bool:
    """Add to the user's row of the day, if there is one. SQL, not the ORM (agentsite/db.py): this runs for
    every model call."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table(Usage)} SET prompt_tokens = prompt_tokens + %s,"
            " completion_tokens = completion_tokens + %s, total_tokens = total_tokens + %s,"
            " requests = requests + 1 WHERE user_id = %s AND day = %s AND model = %s",
            [prompt, completion, total, user_id, _DAY.get_db_prep_value(day, connection), model],
        )
        return bool(cursor.rowcount)


def tokens_today(user_id: int) -> int:
    total = Usage.objects.filter(user_id=user_id, day=today()).aggregate(total=Sum("total_tokens"))["total"]
    return int(total or 0)


def budget_refusal(user_id: int) -> dict[str, str] | None:
    """The `budget_exceeded` error of a turn that would start, or make one more model call, past the user's
    daily budget, else None."""
    budget = settings.AGENTSITE_USER_DAILY_TOKENS
    if not budget:
        return None
    used = tokens_today(user_id)
    if used < budget:
        return None
    return {
        "code": "budget_exceeded",
        "message": f"You used {used:,} of your {budget:,} model tokens for today; "
        "the budget starts again at midnight UTC.",
    }


def usage_report(*, user_id: int, days: int) -> dict[str, Any]:
    """The user's tokens per day and model over the last `days` days (today included), newest first."""
    since = today() - dt.timedelta(days=days - 1)
    rows = Usage.objects.filter(user_id=user_id, day__gte=since).order_by("-day", "model")
    results = [
        {
            "day": row.day.isoformat(),
            "model": row.model,
            "prompt_tokens": row.prompt_tokens,
            "completion_tokens": row.completion_tokens,
            "total_tokens": row.total_tokens,
            "requests": row.requests,
        }
        for row in rows
    ]
    budget = settings.AGENTSITE_USER_DAILY_TOKENS or None
    return {
        "days": days,
        "since": since.isoformat(),
        "results": results,
        "total_tokens": sum(row["total_tokens"] for row in results),
        "today_tokens": sum(row["total_tokens"] for row in results if row["day"] == today().isoformat()),
        "daily_budget": budget,
    }


def daily_totals(report: dict[str, Any]) -> list[tuple[dt.date, int]]:
    """Every day of a report, oldest first, with its tokens over all models (0 on days without use)."""
    since = dt.date.fromisoformat(report["since"])
    by_day: dict[str, int] = {}
    for row in report["results"]:
        by_day[row["day"]] = by_day.get(row["day"], 0) + row["total_tokens"]
    span = [since + dt.timedelta(days=n) for n in range(report["days"])]
    return [(day, by_day.get(day.isoformat(), 0)) for day in span]
