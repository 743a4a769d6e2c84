"""Summarise py-spy raw (collapsed) stacks: where the samples went, by bucket and by function.

    .venv/bin/python bench/profile_summary.py FILE [--top 40] [--buckets] [--grep TEXT]

Each line of a py-spy `--format raw` file is `frame;frame;…;frame count`. Prints the share of samples
each function appears in (inclusive, once per stack) and, with --buckets, the shares of the named parts
of a chat (first matching bucket wins, innermost frame first), which bench/README.md quotes.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

# (bucket, texts): a sample goes to the first bucket any of whose texts is in any frame of its stack, so
# that a part is counted with everything it calls (the model call inside the turn, the SQL inside a view).
BUCKETS: list[tuple[str, tuple[str, ...]]] = [
    ("database thread (SQL, ORM)", ("_DatabaseThread._run",)),
    ("HTTP request thread (middleware, DRF view, its SQL)", ("BaseHandler.get_response",)),
    (
        "model client: request (SDK, httpx, pool)",
        ("SdkStreamRequest.send", "_open_stream", "AsyncResponseContextManager"),
    ),
    (
        "model client: body read (httpx, httpcore, h11)",
        ("aiter_bytes", "aiter_raw", "drain_body", "iter_lines"),
    ),
    ("model client: lines and items", ("agents/model_stream.py", "_StreamAssembler")),
    ("markdown of final answers", ("chat/markdown.py",)),
    ("socket: frames out", ("_send_events", "send_texts")),
    ("turn (agents/turn.py)", ("agents/turn.py", "agents/recording.py")),
    ("controller, event log", ("chat/live/",)),
    ("socket: handshake, connect, frames in", ("chat/consumers.py", "ws_auth.py", "autobahn", "ws_protocol")),
    ("Django's ASGI handler (async side)", ("django/core/handlers", "asgiref/")),
    ("database hand-overs (loop side)", ("agentsite/db.py",)),
]
# What is left goes by its innermost frame: every stack of the event loop starts in daphne and Twisted.
INNERMOST: list[tuple[str, tuple[str, ...]]] = [
    ("daphne/twisted (HTTP parsing, reactor, writes)", ("daphne/", "twisted/")),
    ("event loop", ("asyncio/", "selectors.py")),
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
        shares: Counter[str] = Counter()
        for frames, n in stacks:
            joined = ";".join(frames)
            bucket = next(
                (name for name, texts in BUCKETS if any(text in joined for text in texts)),
                "event loop, other",
            )
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
