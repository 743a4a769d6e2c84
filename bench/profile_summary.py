"""Summarise py-spy raw (collapsed) stacks: where the samples went, by bucket and by function.

    .venv/bin/python bench/profile_summary.py FILE [--top 40] [--buckets] [--grep TEXT]

Each line of a py-spy `--format raw` file is `frame;frame;…;frame count`. Prints the share of samples
each function appears in (inclusive, once per stack) and, with --buckets, the shares of the named parts
of a chat (first matching bucket wins, innermost frame first), which bench/README.md quotes.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

# (bucket, pattern on a frame): checked from the innermost frame outwards, first match wins.
BUCKETS: list[tuple[str, str]] = [
    ("markdown", r"chat/markdown\.py|markdown_it/|nh3"),
    ("database thread", r"agentsite/db\.py:\d+\)$|django/db/|sqlite3"),
    (
        "model client: request setup",
        r"openai/_base_client|httpx2?/_client|httpx2?/_models|openai/_models|anyio/|httpcore2?/_async/connection",
    ),
    ("model client: stream read", r"httpcore2?/|httpx2?/|h11|iter_lines|_decoders"),
    ("model client: parse", r"agents/llm\.py"),
    ("turn", r"agents/turn\.py|agents/recording\.py"),
    ("controller/event log", r"chat/live/"),
    (
        "socket: frames out",
        r"autobahn/websocket/protocol\.py.*send|daphne/ws_protocol\.py.*handle_reply|sendMessage|chat/consumers\.py.*_send_events",
    ),
    (
        "socket: handshake/connect",
        r"autobahn|daphne/ws_protocol|chat/consumers\.py|agentsite/ws_auth\.py|channels/",
    ),
    (
        "REST (Django handler, middleware, DRF)",
        r"django/core/handlers|django/utils/deprecation|rest_framework|django/middleware|asgiref/",
    ),
    ("daphne/twisted HTTP", r"daphne/|twisted/"),
    ("event loop", r"asyncio/"),
]


def read(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text(errors="replace").splitlines():
        head, _, count = line.rpartition(" ")
        if head and count.isdigit():
            stacks.append((head.split(";"), int(count)))
    return stacks


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--buckets", action="store_true")
    parser.add_argument("--grep", default="", help="only stacks with a frame containing this text")
    args = parser.parse_args()
    stacks = [s for f in args.files for s in read(f)]
    if args.grep:
        stacks = [(frames, n) for frames, n in stacks if any(args.grep in frame for frame in frames)]
    total = sum(n for _, n in stacks) or 1
    print(f"{total} samples")
    if args.buckets:
        compiled = [(name, re.compile(pattern)) for name, pattern in BUCKETS]
        shares: Counter[str] = Counter()
        for frames, n in stacks:
            bucket = "other"
            for frame in reversed(frames):
                hit = next((name for name, rx in compiled if rx.search(frame)), None)
                if hit is not None:
                    bucket = hit
                    break
            shares[bucket] += n
        for name, n in shares.most_common():
            print(f"  {n / total * 100:5.1f} %  {name}")
    inclusive: Counter[str] = Counter()
    for frames, n in stacks:
        for frame in set(frames):
            inclusive[frame] += n
    for frame, n in inclusive.most_common(args.top):
        print(f"{n / total * 100:5.1f} %  {frame}")


if __name__ == "__main__":
    main()
