"""The house's shape (docs/architecture.md): which part may import which, and modules a newcomer can read.

Read from the source with `ast` (every import, also those inside functions), never by importing it.
"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The kernel-level apps every feature builds on, lowest first: security (outbound guard, encryption, rate
# limits) → audit (the trail) → accounts (keys, sign-in, lockout, sockets that follow their account).
KERNEL_APPS = ("security", "audit", "accounts")
APPS = ("agents", "chat", "acp", "mcpservers", "cron", "portal")
# agentsite is two things: the framework kernel every app builds on (database access, errors, fields,
# validation, query parameters, pagination, JSON) and the composition root that wires the apps together.
COMPOSITION = (
    "agentsite.urls",
    "agentsite.asgi",
    "agentsite.lifecycle",
    "agentsite.api",
    "agentsite.views",
    "agentsite.management",
)
KERNEL = {"kernel", *KERNEL_APPS}
# Who may import whom. Dependencies point one way: portal → cron → chat → agents ← acp, mcpservers;
# all → accounts → audit → security → agentsite's kernel.
ALLOWED = {
    "kernel": set(),
    "security": {"kernel"},
    "audit": {"kernel", "security"},
    "accounts": {"kernel", "security", "audit"},
    "agents": KERNEL,
    "acp": KERNEL | {"agents"},
    "mcpservers": KERNEL | {"agents"},
    "chat": KERNEL | {"agents"},
    "cron": KERNEL | {"agents", "chat"},
    "portal": KERNEL | {"agents", "acp", "mcpservers", "chat", "cron"},
}
# Files are split by cohesion, not by size: past WARN_LINES a module is worth a look (a warning),
# past MAX_LINES it almost surely holds more than one idea (a failure).
WARN_LINES = 450
MAX_LINES = 700


def production_modules() -> dict[str, Path]:
    modules = {}
    for package in ("agentsite", *KERNEL_APPS, *APPS):
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT)
            if "migrations" in relative.parts:
                continue
            name = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
            modules[name] = path
    return modules


def component(module: str) -> str | None:
    top = module.split(".", 1)[0]
    if top in APPS or top in KERNEL_APPS:
        return top
    if top == "agentsite":
        return "composition" if module.startswith(COMPOSITION) else "kernel"
    return None


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return found


def module_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles among modules (strongly connected components of more than one module)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in graph[module]:
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            component = []
            while (member := stack.pop()) != module:
                component.append(member)
            if component:
                cycles.append(sorted([module, *component]))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return cycles


def test_apps_import_only_what_they_build_on() -> None:
    wrong = []
    for module, path in production_modules().items():
        source = component(module)
        if source in (None, "composition"):
            continue
        for imported in imports_of(path):
            target = component(imported)
            if target is not None and target != source and target not in ALLOWED[source]:
                wrong.append(f"{module} imports {imported} ({source} → {target})")
    assert wrong == []


def test_the_allowed_dependencies_have_no_cycle() -> None:
    def reaches(start: str, goal: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(
            step == goal or (step not in seen and reaches(step, goal, seen | {step}))
            for step in ALLOWED[start]
        )

    assert [name for name in ALLOWED if reaches(name, name)] == []


def test_the_kernel_modules_import_each_other_without_a_cycle() -> None:
    """The kernel and the kernel-level apps (every import, also the deferred ones inside functions): a
    cycle there means two modules that each need the other: one idea in two places, or a rule misplaced."""
    modules = {module: path for module, path in production_modules().items() if component(module) in KERNEL}
    graph = {module: imports_of(path) & modules.keys() for module, path in modules.items()}
    assert module_cycles(graph) == []


def test_no_module_is_longer_than_a_newcomer_reads_in_one_sitting() -> None:
    sizes = {module: len(path.read_text().splitlines()) for module, path in production_modules().items()}
    for module, lines in sorted(sizes.items()):
        if WARN_LINES < lines <= MAX_LINES:
            warnings.warn(f"{module} has {lines} lines: does it still hold one idea?", stacklevel=1)
    assert {module: lines for module, lines in sizes.items() if lines > MAX_LINES} == {}


def test_the_checks_see_what_they_look_for(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import chat.models\ndef f():\n    from cron.models import CronJob\nfrom . import x\n")
    assert imports_of(sample) == {"chat.models", "cron.models", "cron.models.CronJob"}
    assert module_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert module_cycles({"a": {"b"}, "b": set()}) == []
    assert (
        component("agentsite.db") == "kernel"
        and component("agentsite.management.commands.serve") == "composition"
        and component("accounts.services") == "accounts"
        and component("security.management.commands.rotate_secrets") == "security"
    )
    assert component("json") is None


def test_every_model_change_has_its_migration(db: object) -> None:
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)  # exits 1 when one is missing
    assert "No changes detected" in out.getvalue()
