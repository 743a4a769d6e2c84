"""`python -m tests.support.services PG_URL REDIS_URL`: exit 0 when both services answer, 1 otherwise."""

from __future__ import annotations

import sys


def postgres_answers(url: str) -> bool:
    try:
        import psycopg

        with psycopg.connect(url.replace("postgres://", "postgresql://", 1), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
        return True
    except Exception as exc:
        print(f"Postgres at {url}: {exc}", file=sys.stderr)
        return False


def redis_answers(url: str) -> bool:
    try:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
        client.ping()
        client.close()
        return True
    except Exception as exc:
        print(f"Redis at {url}: {exc}", file=sys.stderr)
        return False


if __name__ == "__main__":
    pg, rd = sys.argv[1], sys.argv[2]
    sys.exit(0 if postgres_answers(pg) and redis_answers(rd) else 1)
