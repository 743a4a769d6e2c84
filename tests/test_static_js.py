"""The portal's JavaScript is native ES modules sharing nothing through `window` (docs/architecture.md
"static/js"): every script the templates load is a module (theme.js alone excepted: it must run before the
first paint), no file in static/js assigns to `window.<name>` or looks a function up by a string name, and
every `import` names a file that exists. A static check: no browser needed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
JS = ROOT / "static" / "js"
TEMPLATES = ROOT / "templates"

# Classic scripts on purpose, each with its reason.
CLASSIC = {
    "js/theme.js": "sets the colour theme before the first paint (a module is deferred: a flash)",
    "{{ swagger_ui_bundle }}": "drf-spectacular's Swagger UI, not ours",
    "{{ swagger_ui_standalone }}": "drf-spectacular's Swagger UI, not ours",
    "{{ script_url }}": "drf-spectacular's Swagger UI start-up, not ours",
}

SCRIPT = re.compile(r"<script\b([^>]*)>", re.IGNORECASE)
SRC = re.compile(r"""\bsrc=["'](?:\{%\s*static\s+'([^']+)'\s*%\}|([^"']+))["']""")
IMPORT = re.compile(
    r"""^\s*(?:import|export)\b[^'"]*?\bfrom\s+["']([^"']+)["']|^\s*import\s+["']([^"']+)["']""", re.M
)
WINDOW_ASSIGN = re.compile(r"\bwindow\s*(?:\.\s*[A-Za-z_$][\w$]*|\[[^\]]*\])\s*=(?!=)")
STRING_LOOKUP = re.compile(r"\bwindow\s*\[")


def js_files() -> list[Path]:
    return sorted(JS.rglob("*.js"))


def script_tags() -> list[tuple[str, str]]:
    tags = []
    for path in sorted(TEMPLATES.rglob("*.html")):
        for match in SCRIPT.finditer(path.read_text()):
            tags.append((str(path.relative_to(ROOT)), match.group(1)))
    return tags


def non_module_scripts(tags: list[tuple[str, str]]) -> list[str]:
    bad = []
    for where, attrs in tags:
        src = SRC.search(attrs)
        name = (src.group(1) or src.group(2)) if src else "(inline)"
        if re.search(r"""\btype=["']module["']""", attrs) or name in CLASSIC:
            continue
        bad.append(f"{where}: <script{attrs}>")
    return bad


def window_globals(text: str) -> list[str]:
    code = re.sub(r"//[^\n]*", "", text)
    assigned = [m.group(0) for m in WINDOW_ASSIGN.finditer(code)]
    return assigned + [m.group(0) for m in STRING_LOOKUP.finditer(code)]


def unresolved_imports(path: Path, text: str) -> list[str]:
    bad = []
    for match in IMPORT.finditer(text):
        spec = match.group(1) or match.group(2)
        if not spec.startswith(("./", "../")):
            bad.append(f"{spec} (not a relative path: no build step resolves bare names)")
        elif not (path.parent / spec).resolve().is_file():
            bad.append(spec)
    return bad


def test_every_template_script_is_a_module() -> None:
    tags = script_tags()
    assert any("js/chat/main.js" in attrs for _, attrs in tags)
    assert non_module_scripts(tags) == []


def test_no_file_in_static_js_assigns_to_window_or_looks_up_by_name() -> None:
    found = {str(p.relative_to(ROOT)): window_globals(p.read_text()) for p in js_files()}
    assert {path: hits for path, hits in found.items() if hits} == {}


def test_every_import_resolves_to_a_file() -> None:
    found = {str(p.relative_to(ROOT)): unresolved_imports(p, p.read_text()) for p in js_files()}
    assert {path: bad for path, bad in found.items() if bad} == {}
    assert any(IMPORT.search(p.read_text()) for p in js_files())


def test_classic_scripts_share_nothing() -> None:
    """theme.js, the one classic script, neither exports nor imports (it runs alone, before paint)."""
    text = (JS / "theme.js").read_text()
    assert not IMPORT.search(text) and "export " not in text and window_globals(text) == []


# The checks themselves catch what they are for (bad inputs).
@pytest.mark.parametrize(
    ("attrs", "bad"),
    [
        (""" src="{% static 'js/portal.js' %}" defer""", True),
        (""" src="{% static 'js/portal.js' %}" type="text/javascript\"""", True),
        ("", True),
        (""" type="module" src="{% static 'js/portal.js' %}\"""", False),
        (""" src="{% static 'js/theme.js' %}\"""", False),
    ],
)
def test_the_script_check_finds_classic_scripts(attrs: str, bad: bool) -> None:
    assert bool(non_module_scripts([("t.html", attrs)])) is bad


@pytest.mark.parametrize(
    ("code", "hits"),
    [
        ("window.agentsiteApi = apiFetch;", 1),
        ("window.agentsiteChat = window.agentsiteChat || {};", 1),
        ('window["x"] = 1;', 2),
        ("body = window[form.dataset.build](form);", 1),
        ("if (window.location === x) window.setTimeout(f, 1);", 0),
        ("// window.old = 1;", 0),
        ("window.location.assign(url);", 0),
    ],
)
def test_the_global_check_finds_window_assignments(code: str, hits: int) -> None:
    assert len(window_globals(code)) == hits


def test_the_import_check_finds_missing_files(tmp_path: Path) -> None:
    (tmp_path / "a.js").write_text("")
    here = tmp_path / "main.js"
    text = (
        'import { a } from "./a.js";\nimport { b } from "./b.js";\n'
        'import "lit-html";\nexport { c } from "../gone/c.js";\n'
    )
    assert unresolved_imports(here, text) == [
        "./b.js",
        "lit-html (not a relative path: no build step resolves bare names)",
        "../gone/c.js",
    ]
