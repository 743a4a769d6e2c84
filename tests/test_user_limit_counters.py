"""The counters behind the per-user limits (docs/protocol.md §6.6), with a clock of the test's own: the
token buckets of socket frames (security/ratelimit.py) and the audit trail's window per user and limit
(audit/limits.py). Over real sockets: tests/chat/test_user_limits.py."""

from __future__ import annotations

from agentsite.env import Rate
from audit.limits import LimitHits
from security.ratelimit import TokenBuckets

PER_MINUTE = Rate(count=120, seconds=60)  # 2 a second


def test_a_bucket_lets_a_burst_through_then_refills_at_the_rate() -> None:
    buckets = TokenBuckets()
    assert [buckets.take(1, PER_MINUTE, 30, now=100.0) for _ in range(30)] == [0.0] * 30
    assert buckets.take(1, PER_MINUTE, 30, now=100.0) == 0.5  # half a second until the next token
    assert buckets.take(2, PER_MINUTE, 30, now=100.0) == 0.0  # another user's bucket is full
    assert buckets.take(1, PER_MINUTE, 30, now=100.25) == 0.25  # a refused frame takes nothing
    assert buckets.take(1, PER_MINUTE, 30, now=100.5) == 0.0
    assert buckets.take(1, PER_MINUTE, 30, now=100.5) == 0.5
    assert [buckets.take(1, PER_MINUTE, 30, now=1000.0) for _ in range(31)].count(0.0) == 30  # full, no more


def test_buckets_stay_bounded_by_dropping_those_full_again() -> None:
    buckets = TokenBuckets(kept=10)
    for user in range(10):
        buckets.take(user, PER_MINUTE, 30, now=0.0)
    buckets.take(99, PER_MINUTE, 30, now=60.0)  # all ten are full again by now: dropped
    assert len(buckets._buckets) == 1
    for user in range(10):
        for _ in range(30):
            buckets.take(user, PER_MINUTE, 30, now=60.0)  # empty, none full
    buckets.take(100, PER_MINUTE, 30, now=60.0)
    assert len(buckets._buckets) <= 10


def test_a_limit_is_written_down_once_per_window_saying_how_many_it_stands_for() -> None:
    hits = LimitHits(window=60.0, kept=2)
    assert hits.hit(1, "rate_limited", now=0.0) == 1  # the first: an entry
    assert [hits.hit(1, "rate_limited", now=t) for t in (1.0, 2.0, 59.0)] == [0, 0, 0]
    assert hits.hit(1, "queue_full", now=3.0) == 1  # another limit has its own window
    assert hits.hit(1, "rate_limited", now=61.0) == 4  # this one and the three since
    assert hits.hit(2, "rate_limited", now=61.5) == 1  # (kept=2: the oldest window is forgotten)
    assert hits.hit(1, "queue_full", now=62.0) == 1
