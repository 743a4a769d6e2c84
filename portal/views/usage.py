"""The usage page: model tokens per day over the last 30 days as a bar chart (an SVG drawn here, no script,
no chart library), and per model; staff pick any user (docs/protocol.md §6.4, `GET /api/v1/usage`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.db.models import Sum
from django.http import Http404, HttpResponse
from django.shortcuts import render

from agentsite.query import integer_pk
from chat.models import Usage
from chat.usage import daily_totals, usage_report
from portal.access import AuthenticatedHttpRequest

DAYS = 30
WIDTH, HEIGHT, TOP = 600, 160, 10  # the chart's drawing box (viewBox units)


def chart(days: list[tuple[Any, int]]) -> dict[str, Any]:
    """Bars (x, y, width, height, day, tokens) scaled to the busiest day, and the axis labels."""
    peak = max((tokens for _, tokens in days), default=0)
    step = WIDTH / max(len(days), 1)
    bars = []
    for index, (day, tokens) in enumerate(days):
        height = round((HEIGHT - TOP) * tokens / peak, 1) if peak else 0
        bars.append(
            {
                "x": round(index * step + 1, 1),
                "width": round(step - 2, 1),
                "y": round(HEIGHT - height, 1),
                "height": height,
                "day": day,
                "tokens": tokens,
            }
        )
    return {"bars": bars, "peak": peak, "width": WIDTH, "height": HEIGHT}


def per_model(report: dict[str, Any]) -> list[dict[str, Any]]:
    totals: dict[str, dict[str, int]] = {}
    for row in report["results"]:
        model = totals.setdefault(row["model"], {"total_tokens": 0, "requests": 0})
        model["total_tokens"] += row["total_tokens"]
        model["requests"] += row["requests"]
    return [
        {"model": name, **values}
        for name, values in sorted(totals.items(), key=lambda kv: -kv[1]["total_tokens"])
    ]


@login_required
def usage(request: AuthenticatedHttpRequest) -> HttpResponse:
    who: Any = request.user
    wanted = request.GET.get("user", "")
    if wanted and request.user.is_staff:
        pk = integer_pk(wanted)
        who = get_user_model().objects.filter(pk=pk).first() if pk is not None else None
        if who is None:
            raise Http404("No such user")
    report = usage_report(user_id=who.pk, days=DAYS)
    context: dict[str, Any] = {
        "who": who,
        "report": report,
        "chart": chart(daily_totals(report)),
        "models": per_model(report),
        "nav": "usage",
    }
    if request.user.is_staff:  # everyone with usage in the window, busiest first
        since = report["since"]
        context["people"] = (
            Usage.objects.filter(day__gte=since)
            .values("user_id", "user__username")
            .annotate(tokens=Sum("total_tokens"))
            .order_by("-tokens")[:200]
        )
    return render(request, "portal/usage.html", context)
