"""Schedule maths: next run times per type, timezones and DST, misfires, upcoming runs, descriptions."""

from __future__ import annotations

import datetime as dt

import pytest

from cron.schedule import describe, due_and_next, next_run_at, upcoming
from cron.specs import ScheduleSpec

UTC = dt.UTC


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def cron(expression: str, timezone: str = "UTC") -> ScheduleSpec:
    return ScheduleSpec(type="cron", cron=expression, timezone=timezone)


def interval(seconds: int) -> ScheduleSpec:
    return ScheduleSpec(type="interval", every_seconds=seconds)


def once(run_at: dt.datetime, timezone: str = "UTC") -> ScheduleSpec:
    return ScheduleSpec(type="once", run_at=run_at, timezone=timezone)


ANCHOR = utc(2025, 1, 1)
BERLIN_WEEKDAYS_8 = cron("0 8 * * 1-5", "Europe/Berlin")


# --- cron in a timezone ------------------------------------------------------------------------------


def test_berlin_weekday_0800_moves_from_0700_to_0600_utc_across_march_dst_change() -> None:
    # DST starts Sunday 2025-03-30: Friday is still CET (+1), Monday is CEST (+2).
    times = upcoming(BERLIN_WEEKDAYS_8, now=utc(2025, 3, 27, 12), anchor=ANCHOR, count=3)

    assert times == [utc(2025, 3, 28, 7), utc(2025, 3, 31, 6), utc(2025, 4, 1, 6)]


def test_berlin_weekday_0800_moves_from_0600_to_0700_utc_across_october_dst_change() -> None:
    # DST ends Sunday 2025-10-26: Friday is CEST (+2), Monday is CET (+1); the weekend is skipped.
    times = upcoming(BERLIN_WEEKDAYS_8, now=utc(2025, 10, 23, 12), anchor=ANCHOR, count=3)

    assert times == [utc(2025, 10, 24, 6), utc(2025, 10, 27, 7), utc(2025, 10, 28, 7)]


def test_time_inside_spring_forward_gap_runs_once_at_the_first_minute_after_the_gap() -> None:
    # 02:30 does not exist in Berlin on 2025-03-30: it runs at 03:00 CEST (01:00Z), then normally.
    times = upcoming(cron("30 2 * * *", "Europe/Berlin"), now=utc(2025, 3, 29, 12), anchor=ANCHOR, count=3)

    assert times == [utc(2025, 3, 30, 1), utc(2025, 3, 31, 0, 30), utc(2025, 4, 1, 0, 30)]


def test_time_inside_fall_back_repeat_runs_once_at_its_first_occurrence() -> None:
    # 02:30 happens twice in Berlin on 2025-10-26 (00:30Z CEST, 01:30Z CET): only the first one runs.
    times = upcoming(cron("30 2 * * *", "Europe/Berlin"), now=utc(2025, 10, 25, 12), anchor=ANCHOR, count=2)

    assert times == [utc(2025, 10, 26, 0, 30), utc(2025, 10, 27, 1, 30)]


def test_after_inside_second_copy_of_repeated_hour_does_not_run_the_job_again() -> None:
    # At 01:40Z it is 02:40 CET, the second 02:40 of the night; the 02:50 run happened at 00:50Z.
    spec = cron("50 2 * * *", "Europe/Berlin")

    following = next_run_at(spec, after=utc(2025, 10, 26, 1, 40), anchor=ANCHOR)

    assert following == utc(2025, 10, 27, 1, 50)


def test_wildcard_hour_job_follows_elapsed_time_through_the_repeated_hour() -> None:
    # Every 30 minutes of real time: the repeated hour is not skipped or merged.
    times = upcoming(cron("*/30 * * * *", "Europe/Berlin"), now=utc(2025, 10, 25, 23), anchor=ANCHOR, count=6)

    assert times == [
        utc(2025, 10, 25, 23, 30),  # 01:30 CEST
        utc(2025, 10, 26, 0, 0),  # 02:00 CEST
        utc(2025, 10, 26, 0, 30),  # 02:30 CEST
        utc(2025, 10, 26, 1, 0),  # 02:00 CET
        utc(2025, 10, 26, 1, 30),  # 02:30 CET
        utc(2025, 10, 26, 2, 0),  # 03:00 CET
    ]


def test_new_york_0900_follows_the_us_march_dst_change() -> None:
    # US DST starts 2025-03-09 (two weeks before Europe): EST 14:00Z, then EDT 13:00Z.
    times = upcoming(cron("0 9 * * *", "America/New_York"), now=utc(2025, 3, 8, 0), anchor=ANCHOR, count=2)

    assert times == [utc(2025, 3, 8, 14), utc(2025, 3, 9, 13)]


def test_new_york_spring_gap_time_runs_at_0300_edt() -> None:
    following = next_run_at(cron("30 2 * * *", "America/New_York"), after=utc(2025, 3, 9, 5), anchor=ANCHOR)

    assert following == utc(2025, 3, 9, 7)


def test_utc_cron_next_run_is_strictly_after_the_given_time() -> None:
    spec = cron("*/15 * * * *")

    assert next_run_at(spec, after=utc(2025, 5, 5, 10, 7, 30), anchor=ANCHOR) == utc(2025, 5, 5, 10, 15)
    assert next_run_at(spec, after=utc(2025, 5, 5, 10, 15), anchor=ANCHOR) == utc(2025, 5, 5, 10, 30)


def test_yearly_cron_fires_on_the_next_first_of_january() -> None:
    following = next_run_at(cron("0 0 1 1 *"), after=utc(2025, 6, 1), anchor=ANCHOR)

    assert following == utc(2026, 1, 1)


def test_after_in_another_offset_gives_the_same_utc_answer() -> None:
    tokyo = dt.timezone(dt.timedelta(hours=9))
    after = dt.datetime(2025, 3, 28, 12, tzinfo=tokyo)  # 03:00Z

    following = next_run_at(BERLIN_WEEKDAYS_8, after=after, anchor=ANCHOR)

    assert following == utc(2025, 3, 28, 7)
    assert following is not None and following.tzinfo is UTC


# --- interval and once -----------------------------------------------------------------------------


def test_interval_runs_at_fixed_rate_from_the_anchor_not_from_the_last_run() -> None:
    spec = interval(600)
    anchor = utc(2025, 5, 5, 10, 0, 0)

    assert next_run_at(spec, after=anchor, anchor=anchor) == utc(2025, 5, 5, 10, 10)
    # A run that started late (10:13) still leads to 10:20, not 10:23.
    assert next_run_at(spec, after=utc(2025, 5, 5, 10, 13), anchor=anchor) == utc(2025, 5, 5, 10, 20)
    assert next_run_at(spec, after=utc(2025, 5, 5, 10, 20), anchor=anchor) == utc(2025, 5, 5, 10, 30)


def test_interval_keeps_the_anchors_seconds_and_ignores_timezone() -> None:
    anchor = utc(2025, 10, 25, 23, 59, 17)
    spec = ScheduleSpec(type="interval", every_seconds=3600, timezone="Europe/Berlin")

    times = upcoming(spec, now=utc(2025, 10, 26, 0, 30), anchor=anchor, count=3)

    assert times == [utc(2025, 10, 26, 0, 59, 17), utc(2025, 10, 26, 1, 59, 17), utc(2025, 10, 26, 2, 59, 17)]


def test_interval_before_its_anchor_first_runs_one_period_after_the_anchor() -> None:
    anchor = utc(2025, 5, 5, 10)

    assert next_run_at(interval(60), after=utc(2025, 5, 5, 9), anchor=anchor) == utc(2025, 5, 5, 10, 1)


def test_once_in_the_future_runs_at_run_at() -> None:
    run_at = utc(2030, 1, 1, 8)

    assert next_run_at(once(run_at), after=utc(2029, 12, 31), anchor=ANCHOR) == run_at


@pytest.mark.parametrize("after", [utc(2030, 1, 1, 8), utc(2030, 1, 1, 8, 0, 1)])
def test_once_at_or_before_now_never_runs_again(after: dt.datetime) -> None:
    assert next_run_at(once(utc(2030, 1, 1, 8)), after=after, anchor=ANCHOR) is None


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="after must be a timezone-aware"):
        next_run_at(interval(60), after=dt.datetime(2025, 1, 1), anchor=ANCHOR)


# --- misfires --------------------------------------------------------------------------------------


def test_interval_missed_for_many_ticks_fires_once_and_continues_after_now() -> None:
    anchor = utc(2025, 5, 5, 10)
    now = utc(2025, 5, 5, 13, 0, 30)  # 180 one-minute runs were missed

    is_due, following = due_and_next(interval(60), now=now, next_run_at=utc(2025, 5, 5, 10, 1), anchor=anchor)

    assert is_due is True
    assert following == utc(2025, 5, 5, 13, 1)


def test_daily_cron_missed_for_three_days_fires_once_and_next_is_tomorrow() -> None:
    spec = cron("0 8 * * *", "Europe/Berlin")
    now = utc(2025, 6, 4, 9)  # 11:00 in Berlin; the 2nd, 3rd and 4th were missed

    is_due, following = due_and_next(spec, now=now, next_run_at=utc(2025, 6, 2, 6), anchor=ANCHOR)

    assert (is_due, following) == (True, utc(2025, 6, 5, 6))


def test_job_not_yet_due_keeps_its_stored_next_run() -> None:
    stored = utc(2025, 5, 5, 10, 1)

    assert due_and_next(interval(60), now=utc(2025, 5, 5, 10), next_run_at=stored, anchor=ANCHOR) == (
        False,
        stored,
    )


def test_job_due_exactly_now_fires() -> None:
    now = utc(2025, 5, 5, 10, 1)

    is_due, following = due_and_next(interval(60), now=now, next_run_at=now, anchor=utc(2025, 5, 5, 10))

    assert (is_due, following) == (True, utc(2025, 5, 5, 10, 2))


def test_due_once_job_fires_and_has_no_following_run() -> None:
    run_at = utc(2030, 1, 1, 8)

    assert due_and_next(once(run_at), now=utc(2030, 1, 2), next_run_at=run_at, anchor=ANCHOR) == (True, None)


def test_finished_job_without_next_run_is_never_due() -> None:
    assert due_and_next(interval(60), now=utc(2030, 1, 1), next_run_at=None, anchor=ANCHOR) == (False, None)


# --- upcoming and describe -------------------------------------------------------------------------


def test_upcoming_returns_count_increasing_times() -> None:
    times = upcoming(cron("0 * * * *"), now=utc(2025, 5, 5, 10, 30), anchor=ANCHOR, count=4)

    assert times == [utc(2025, 5, 5, h) for h in (11, 12, 13, 14)]


def test_upcoming_of_a_once_job_stops_after_its_only_run() -> None:
    run_at = utc(2030, 1, 1, 8)

    assert upcoming(once(run_at), now=utc(2029, 1, 1), anchor=ANCHOR) == [run_at]
    assert upcoming(once(run_at), now=utc(2031, 1, 1), anchor=ANCHOR) == []


def test_describe_cron_in_words_with_its_timezone() -> None:
    assert describe(BERLIN_WEEKDAYS_8) == "At 08:00, Monday through Friday (Europe/Berlin)"
    assert describe(cron("*/15 * * * *")) == "Every 15 minutes (UTC)"


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (900, "every 15 minutes"),
        (60, "every minute"),
        (5400, "every 90 minutes"),
        (7200, "every 2 hours"),
        (86400, "every day"),
        (45, "every 45 seconds"),
    ],
)
def test_describe_interval_in_the_largest_whole_unit(seconds: int, words: str) -> None:
    assert describe(interval(seconds)) == words


def test_describe_once_shows_run_at_in_the_jobs_timezone() -> None:
    assert (
        describe(once(utc(2030, 7, 1, 6, 30), "Europe/Berlin")) == "once at 2030-07-01 08:30 (Europe/Berlin)"
    )
