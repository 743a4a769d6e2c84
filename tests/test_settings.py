"""Settings from the environment: typed parsers that fail loudly, and start-up checks of a deployment.

The start-up cases run `manage.py` in a subprocess with a controlled environment, because settings are
read once per process.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from agentsite.env import env_bool, env_choice, env_float, env_int, env_list, env_str

REPO_ROOT = Path(__file__).resolve().parents[1]

# --- parsers --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("true", True), ("YES", True), (" on ", True), ("0", False), ("False", False), ("", False)],
)
def test_env_bool_accepts_the_usual_spellings(raw: str, expected: bool) -> None:
    assert env_bool("FLAG", not expected, environ={"FLAG": raw}) is expected


def test_env_bool_uses_default_when_unset() -> None:
    assert env_bool("FLAG", True, environ={}) is True
    assert env_bool("FLAG", False, environ={}) is False


@pytest.mark.parametrize("raw", ["yes please", "2", "enabled", "tru"])
def test_env_bool_refuses_anything_else_naming_the_variable(raw: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="DEBUG") as info:
        env_bool("DEBUG", False, environ={"DEBUG": raw})
    assert repr(raw) in str(info.value)


def test_env_int_parses_and_defaults() -> None:
    assert env_int("N", 5, environ={"N": " 42 "}) == 42
    assert env_int("N", 5, environ={}) == 5
    assert env_int("N", 5, environ={"N": ""}) == 5


@pytest.mark.parametrize("raw", ["ten", "1.5", "1e3", "0x10"])
def test_env_int_refuses_non_integers_naming_the_variable(raw: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="AGENTSITE_MAX_BODY_BYTES"):
        env_int("AGENTSITE_MAX_BODY_BYTES", 1, environ={"AGENTSITE_MAX_BODY_BYTES": raw})


def test_env_int_refuses_values_below_the_minimum() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"AGENTSITE_MAX_BODY_BYTES.*at least 1024"):
        env_int("AGENTSITE_MAX_BODY_BYTES", 2048, minimum=1024, environ={"AGENTSITE_MAX_BODY_BYTES": "10"})
    assert env_int("X", 0, minimum=1024, environ={"X": "1024"}) == 1024


def test_env_float_parses_and_refuses() -> None:
    assert env_float("DELAY", 1.0, environ={"DELAY": "0.25"}) == 0.25
    with pytest.raises(ImproperlyConfigured, match="DELAY"):
        env_float("DELAY", 1.0, environ={"DELAY": "soon"})
    with pytest.raises(ImproperlyConfigured, match="DELAY"):
        env_float("DELAY", 1.0, minimum=0.0, environ={"DELAY": "-1"})
    with pytest.raises(ImproperlyConfigured, match="DELAY"):
        env_float("DELAY", 1.0, environ={"DELAY": "nan"})


def test_env_choice_accepts_choices_case_insensitively_and_refuses_others() -> None:
    assert (
        env_choice("AGENTSITE_AUTH", "required", ("required", "open"), environ={"AGENTSITE_AUTH": "Open"})
        == "open"
    )
    assert env_choice("AGENTSITE_AUTH", "required", ("required", "open"), environ={}) == "required"
    with pytest.raises(ImproperlyConfigured, match=r"AGENTSITE_AUTH.*required, open"):
        env_choice("AGENTSITE_AUTH", "required", ("required", "open"), environ={"AGENTSITE_AUTH": "none"})


def test_env_list_splits_on_commas() -> None:
    assert env_list("HOSTS", ["a"], environ={"HOSTS": " x.com, y.com ,,"}) == ["x.com", "y.com"]
    assert env_list("HOSTS", ["a"], environ={}) == ["a"]
    assert env_str("S", "d", environ={"S": "  v "}) == "v"


# --- start-up in a subprocess ---------------------------------------------------------------------


def base_environ(data_dir: Path, **extra: str) -> dict[str, str]:
    """A clean, production-like environment: nothing from the test run leaks in."""
    environ = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "agentsite.settings",
        "AGENTSITE_DATA_DIR": str(data_dir),
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "example.com",
    }
    environ.update(extra)
    return {key: value for key, value in environ.items() if value is not None}


def manage(environ: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_deploy_passes_in_a_production_like_environment(tmp_path: Path) -> None:
    result = manage(base_environ(tmp_path), "check", "--deploy", "--fail-level", "WARNING")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_without_secret_key_production_generates_one_into_the_data_dir(tmp_path: Path) -> None:
    environ = base_environ(tmp_path)
    del environ["SECRET_KEY"]

    result = manage(environ, "check")

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    key = tmp_path / "secret_key"
    assert key.stat().st_mode & 0o777 == 0o600
    assert len(key.read_text().strip()) >= 50


def test_an_empty_secret_key_file_stops_the_start_naming_it(tmp_path: Path) -> None:
    environ = base_environ(tmp_path)
    del environ["SECRET_KEY"]
    (tmp_path / "secret_key").write_text("\n")

    result = manage(environ, "check")

    assert result.returncode != 0
    assert f"{tmp_path / 'secret_key'} is empty" in result.stderr


def test_development_generates_and_keeps_a_secret_key(tmp_path: Path) -> None:
    environ = base_environ(tmp_path, DEBUG="true")
    del environ["SECRET_KEY"]
    code = "from django.conf import settings; print(settings.SECRET_KEY)"

    first = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=REPO_ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    second = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=REPO_ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert first.returncode == 0, first.stderr
    assert len(first.stdout.strip()) >= 50
    assert first.stdout == second.stdout
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0


def test_open_auth_is_refused_with_debug_off(tmp_path: Path) -> None:
    result = manage(base_environ(tmp_path, AGENTSITE_AUTH="open"), "check")

    assert result.returncode != 0
    assert "AGENTSITE_AUTH=open" in result.stderr
    assert "DEBUG" in result.stderr


def test_bad_debug_value_is_refused(tmp_path: Path) -> None:
    result = manage(base_environ(tmp_path, DEBUG="yes please"), "check")

    assert result.returncode != 0
    assert "DEBUG='yes please' is not a boolean" in result.stderr


@pytest.mark.parametrize("url", ["nonsense://whatever/db", "not a url at all"])
def test_bad_database_url_fails_clearly(tmp_path: Path, url: str) -> None:
    result = manage(base_environ(tmp_path, DATABASE_URL=url), "check")

    assert result.returncode != 0
    assert "DATABASE_URL" in result.stderr
