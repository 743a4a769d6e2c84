"""The data migrations that encrypt provider keys and runner env values stored in clear by earlier versions
(agents 0005, acp 0003), and their reverse — on a real SQLite file, with `manage.py migrate`."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from cryptography.fernet import Fernet

from tests.test_settings import REPO_ROOT, base_environ

KEY = Fernet.generate_key().decode()
CANARY_KEY = "sk-clear-from-an-old-version"
CANARY_ENV = "env-clear-from-an-old-version"


def migrate(environ: dict[str, str], *targets: str) -> None:
    for target in targets or ("",):
        args = [sys.executable, "manage.py", "migrate", "--noinput", *target.split()]
        done = subprocess.run(args, cwd=REPO_ROOT, env=environ, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr


def rows(database: Path) -> tuple[str, dict[str, str]]:
    with sqlite3.connect(database) as db:
        key = db.execute("SELECT api_key FROM agents_provider WHERE id = 'old'").fetchone()[0]
        env = db.execute("SELECT env FROM acp_acprunner WHERE name = 'old'").fetchone()[0]
    return key, json.loads(env)


def test_clear_rows_are_encrypted_by_the_migration_and_decrypted_by_its_reverse(tmp_path: Path) -> None:
    environ = base_environ(tmp_path, AGENTSITE_SECRETS_KEY=KEY)
    database = tmp_path / "agentsite.sqlite3"
    migrate(environ, "agents 0004", "acp 0002")
    with sqlite3.connect(database) as db:
        db.execute(
            "INSERT INTO agents_provider (id, name, base_url, api_key, model_list, default_model,"
            " created_at, updated_at) VALUES ('old', 'Old', 'http://127.0.0.1:9/v1', ?, '[]', '',"
            " '2025-01-01', '2025-01-01')",
            (CANARY_KEY,),
        )
        db.execute(
            "INSERT INTO agents_agent (name, description, system_prompt, model, sandbox_network, created_at,"
            " updated_at) VALUES ('a', '', '', '', 0, '2025-01-01', '2025-01-01')"
        )
        db.execute(
            "INSERT INTO acp_acprunner (agent_id, name, enabled, command, args, env, trusted,"
            " tool_parse_mode, timeout_seconds, sandbox_paths, created_at, updated_at)"
            " VALUES ('a', 'old', 0, '', '[]', ?, 0, 'call_title', 300, '[]', '2025-01-01', '2025-01-01')",
            (json.dumps({"TOKEN": CANARY_ENV}),),
        )

    migrate(environ)
    key, env = rows(database)

    assert Fernet(KEY).decrypt(key.encode()).decode() == CANARY_KEY
    assert set(env) == {"TOKEN"} and Fernet(KEY).decrypt(env["TOKEN"].encode()).decode() == CANARY_ENV

    migrate(environ, "acp 0002", "agents 0004")
    assert rows(database) == (CANARY_KEY, {"TOKEN": CANARY_ENV})
