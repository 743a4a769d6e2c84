"""The strictly typed modules stay strict (docs/architecture.md "Types"): the turn contract, the turn, the
live core and the public API modules are checked with mypy's strict flags (pyproject.toml
[[tool.mypy.overrides]]), here in `make test` as in `make lint`.

mypy runs with the project's configuration and its incremental cache (.mypy_cache, shared with `make lint`):
a few seconds when the cache is warm, about a minute cold.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What issue 25 asked to be strict; the configuration may add modules, never drop one of these.
REQUIRED = {
    "agents.contract",
    "agents.turn",
    "chat.live.*",
    "chat.api",
    "agents.api",
    "cron.api",
    "acp.api",
    "mcpservers.api",
    "agentsite.api",
    "accounts.api",
    "audit.api",
}
# mypy's --strict, flag by flag (it has no per-module `strict`).
STRICT_FLAGS = {
    "disallow_untyped_defs",
    "disallow_incomplete_defs",
    "disallow_untyped_calls",
    "disallow_untyped_decorators",
    "disallow_any_generics",
    "disallow_subclassing_any",
    "check_untyped_defs",
    "warn_return_any",
    "warn_unused_ignores",
    "no_implicit_reexport",
    "strict_equality",
    "extra_checks",
}


def _strict_override() -> dict[str, Any]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    overrides = config["tool"]["mypy"].get("overrides", [])
    strict = [entry for entry in overrides if all(entry.get(flag) is True for flag in STRICT_FLAGS)]
    assert strict, "pyproject.toml has no [[tool.mypy.overrides]] entry with every strict flag set"
    assert len(strict) == 1
    return strict[0]


def _paths(modules: list[str]) -> list[str]:
    paths = []
    for module in modules:
        if module.endswith(".*"):
            path = ROOT.joinpath(*module[:-2].split("."))
        else:
            path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
        assert path.exists(), f"{module} in the strict list names no module ({path})"
        paths.append(str(path.relative_to(ROOT)))
    return paths


def test_the_strict_list_holds_the_contract_the_turn_the_live_core_and_the_public_apis() -> None:
    modules = set(_strict_override()["module"])
    assert REQUIRED <= modules, f"no longer strict: {sorted(REQUIRED - modules)}"


@pytest.mark.timeout(300)
def test_mypy_strict_passes_on_the_strict_modules() -> None:
    paths = _paths(list(_strict_override()["module"]))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DEBUG": "true", "AGENTSITE_DATA_DIR": "var/mypy"}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml", *paths],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=290,
    )
    assert done.returncode == 0, f"mypy (strict modules) failed:\n{done.stdout}{done.stderr}"
    assert "Success" in done.stdout
