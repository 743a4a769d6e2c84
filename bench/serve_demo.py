"""`manage.py serve` with the demo model's reply fixed at K words (K deltas), for the benchmark.

agents/demo.py answers with a fixed text of ~70 words plus an echo of the user's message, so the number
of deltas cannot be set from outside. Rather than a fake OpenAI server (a second process competing for
the 2 cores, plus the openai SDK's per-chunk parsing), this launcher swaps the demo's reply text before
the server starts. Everything after the model — AgentTurn, SessionController, EventLog, the consumer,
daphne — runs unchanged. K comes from BENCH_DEMO_CHUNKS (default 50); the pace is AGENTSITE_DEMO_DELAY.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    from common import reply_pieces

    import agents.demo

    text = "".join(reply_pieces(int(os.environ.get("BENCH_DEMO_CHUNKS", "50"))))
    agents.demo.demo_reply = lambda user_text: text  # type: ignore[assignment]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    os.chdir(ROOT)
    from django.core.management import execute_from_command_line

    execute_from_command_line(["manage.py", "serve", *sys.argv[1:]])


if __name__ == "__main__":
    main()
