"""Files that code, tests and docs cite exist under that name (a moved module left `chat/ownership.py` cited
where it is now `chat/live/cluster/ownership.py`), and the live core's old name, "hub", is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ("agentsite", "chat", "agents", "acp", "mcpservers", "cron", "portal", "tests", "static", "templates")
CITED = re.compile(rf"\b((?:{'|'.join(APPS[:-2])})/[A-Za-z0-9_/]+\.(?:py|js))\b")
HUB = re.compile(r"\bhub\b", re.IGNORECASE)


def sources() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*")):
            if path.suffix in {".py", ".js", ".html", ".md"} and "migrations" not in path.parts:
                found.append(path)
    return found


def test_every_cited_file_exists() -> None:
    missing = []
    for source in sources():
        if source == Path(__file__).resolve():
            continue
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
            for cited in CITED.findall(line):
                # Scripts are cited from static/js/ too ("chat/main.js").
                if not (ROOT / cited).exists() and not (ROOT / "static" / "js" / cited).exists():
                    missing.append(f"{source.relative_to(ROOT)}:{number}: {cited}")
    assert missing == []


def test_the_live_core_is_not_called_the_hub() -> None:
    stale = [
        f"{source.relative_to(ROOT)}:{number}"
        for source in sources()
        if source != Path(__file__).resolve()
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1)
        if HUB.search(line) and "github" not in line.lower()
    ]
    assert stale == []
