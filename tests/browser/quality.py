"""Quality gates for a page in the browser: nothing sticks out sideways, nothing is logged as an error, and
axe-core (axe-playwright-python bundles axe.min.js: no CDN) finds no serious or critical violation."""

from __future__ import annotations

import json
import re
from typing import Any

from playwright.sync_api import expect

SERIOUS = {"serious", "critical"}


def watch(page: Any) -> list[str]:
    """Collect console errors and page errors of `page` from now on (the list fills as they come)."""
    problems: list[str] = []

    def console(msg: Any) -> None:
        if msg.type == "error":
            problems.append(f"console: {msg.text} @ {msg.location.get('url', '')}")

    page.on("console", console)
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    page.quality_problems = problems  # type: ignore[attr-defined]
    return problems


def overflow(page: Any) -> int:
    """How many pixels the page is wider than the viewport (0: nothing sticks out sideways)."""
    return int(page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))


def axe_violations(page: Any) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [
        f"{v['id']} ({v['impact']}): {v['help']} — " + ", ".join(str(n["target"]) for n in v["nodes"][:3])
        for v in results.response["violations"]
        if v.get("impact") in SERIOUS
    ]


def assert_clean(page: Any, label: str, *, status: int = 200) -> None:
    """The three gates, with a message naming the page and what failed (a page expected to answer 404 may
    log that about itself, nothing else)."""
    problems: list[str] = getattr(page, "quality_problems", [])
    if status == 404:
        problems[:] = [p for p in problems if not (p.endswith(" @ " + page.url) and "404" in p)]
    problems = list(problems)
    getattr(page, "quality_problems", []).clear()
    sideways = overflow(page)
    violations = axe_violations(page)
    assert (sideways, problems, violations) == (0, [], []), (
        f"{label}: {sideways}px overflow, {problems}, {violations}"
    )


TRANSCRIPT_SHAPE = """
() => {
  // The transcript as data: tags, classes, text, and which controls there are; what only changes how it
  // is shown (open details, scroll, focus) is left out.
  const shape = (node) => {
    if (node.nodeType === Node.TEXT_NODE) {
      const text = node.textContent.replace(/\\s+/g, " ").trim();
      return text || null;
    }
    if (node.nodeType !== Node.ELEMENT_NODE) return null;
    const classes = Array.from(node.classList).filter((c) => c !== "streaming").sort().join(".");
    const kids = Array.from(node.childNodes).map(shape).filter((x) => x !== null);
    const out = [node.tagName.toLowerCase() + (classes ? "." + classes : "")];
    for (const name of ["data-status", "data-turn", "hidden", "disabled"]) {
      if (!node.hasAttribute(name)) continue;
      out.push(name + "=" + (name === "data-turn" ? "*" : node.getAttribute(name)));
    }
    return out.concat(kids);
  };
  return JSON.stringify(shape(document.getElementById("transcript")));
}
"""


def settled(page: Any) -> None:
    """The chat is idle and drawn from its stored history (static/js/chat/main.js marks it)."""
    expect(page.locator("#transcript[data-synced='1']")).to_have_count(1, timeout=15_000)
    expect(page.locator("#run-state")).to_have_text("")


def transcript_shape(page: Any) -> Any:
    return json.loads(page.evaluate(TRANSCRIPT_SHAPE))


def reload_settled(page: Any) -> None:
    page.reload()
    expect(page.locator("#conn")).to_have_text(re.compile("connected|closed"))
    settled(page)
