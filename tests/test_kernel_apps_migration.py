"""Upgrading a database made by the release before accounts/ and audit/ took their models from the agentsite
app (docs/architecture.md): on a real SQLite file, with `manage.py migrate`, the way a site upgrades.

The old database is made by migrating every app as that release had it (agentsite up to 0003, no accounts/
audit migrations); its rows are written as that release wrote them (the moved tables by SQL, the rest through
the unchanged models). After `migrate`, the same rows are read through the new models, keys still
authenticate, a permission granted on the old app label still holds, and no table was made anew."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cryptography.fernet import Fernet

from tests.test_settings import REPO_ROOT, base_environ

KEY = Fernet.generate_key().decode()
SECRET = "ask_" + "k" * 40
PROVIDER_KEY = "sk-provider-from-the-previous-release"
# What the previous release had: the agentsite app with both models; the other apps as they are today.
PREVIOUS_RELEASE = (
    "contenttypes",
    "auth",
    "agentsite 0003_api_key_expires_at",
    "admin",
    "sessions",
    "axes",
    "agents",
    "acp",
    "mcpservers",
    "chat",
    "cron",
)

WRITE_OLD_ROWS = f"""
from django.contrib.auth.models import Permission, User
from django.db import connection
from accounts.models import hash_key
from agents.models import Provider
from django.contrib.contenttypes.models import ContentType
# What the previous release's post_migrate made for its agentsite models (today's agentsite has none).
for model, name in (("apikey", "API key"), ("auditentry", "audit entry")):
    content_type = ContentType.objects.create(app_label="agentsite", model=model)
    for action in ("add", "change", "delete", "view"):
        Permission.objects.create(content_type=content_type, codename=f"{{action}}_{{model}}",
                                  name=f"Can {{action}} {{name}}")
user = User.objects.create_user("olduser", password="pw-old-release", is_staff=True)
user.user_permissions.add(Permission.objects.get(content_type__app_label="agentsite", codename="view_apikey"))
with connection.cursor() as cursor:
    cursor.execute(
        "INSERT INTO agentsite_apikey (user_id, name, prefix, key_hash, created_at)"
        " VALUES (%s, %s, %s, %s, %s)",
        [user.pk, "old script", "{SECRET[:12]}", hash_key("{SECRET}"), "2026-11-01 10:00:00"],
    )
    cursor.execute(
        "INSERT INTO agentsite_auditentry (created_at, user_id, username, address, action, object_type,"
        " object_id, summary, details) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
        ["2026-11-01 10:00:01", user.pk, "olduser", "192.0.2.7", "key.create", "api_key", "1",
         "olduser created key 'old script'", '{{"name": "old script"}}'],
    )
Provider.objects.create(id="old", name="Old", base_url="http://127.0.0.1:9/v1", api_key="{PROVIDER_KEY}")
"""

READ_ROWS = f"""
import json
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from accounts.models import ApiKey
from accounts.services import api_key_authenticate
from agents.models import Provider
from audit.models import AuditEntry
key = ApiKey.objects.select_related("user").get()
entry = AuditEntry.objects.get(action="key.create")
user = User.objects.get(username="olduser")
print(json.dumps({{
    "key": [key.pk, key.name, key.user.username, [k.pk for k in user.api_keys.all()]],
    "authenticates": getattr(api_key_authenticate("{SECRET}"), "username", None),
    "entry": [entry.action, entry.username, entry.address, entry.details],
    "provider_key": Provider.objects.get(id="old").api_key,
    "perm": user.has_perm("accounts.view_apikey"),
    "content_types": sorted(
        f"{{ct.app_label}}.{{ct.model}}"
        for ct in ContentType.objects.filter(model__in=["apikey", "auditentry"])
    ),
    "tables": sorted(
        t for t in connection.introspection.table_names() if t.endswith(("apikey", "auditentry"))
    ),
}}))
"""


def manage(environ: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args, *(["--no-imports"] if args[0] == "shell" else [])],
        cwd=REPO_ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_database_of_the_previous_release_upgrades_with_its_rows_and_permissions(tmp_path: Path) -> None:
    environ = base_environ(tmp_path, AGENTSITE_SECRETS_KEY=KEY)
    migrations = "; ".join(
        f"call_command('migrate', *{target.split()!r}, verbosity=0)" for target in PREVIOUS_RELEASE
    )
    manage(environ, "shell", "-c", f"from django.core.management import call_command; {migrations}")
    manage(environ, "shell", "-c", WRITE_OLD_ROWS)
    ids = json.loads(
        manage(
            environ,
            "shell",
            "-c",
            "import json; from django.contrib.contenttypes.models"
            " import ContentType as C; print(json.dumps({c.model: c.pk for c in"
            " C.objects.filter(app_label='agentsite')}))",
        )
    )
    assert set(ids) == {"apikey", "auditentry"}  # the old release's content types, before the upgrade

    manage(environ, "migrate", "--noinput")
    upgraded = json.loads(manage(environ, "shell", "-c", READ_ROWS))

    assert upgraded["key"] == [1, "old script", "olduser", [1]]
    assert upgraded["authenticates"] == "olduser"
    assert upgraded["entry"] == ["key.create", "olduser", "192.0.2.7", {"name": "old script"}]
    assert upgraded["provider_key"] == PROVIDER_KEY  # encrypted fields read through security/
    assert upgraded["perm"] is True  # the grant on agentsite.view_apikey followed the model
    assert upgraded["content_types"] == ["accounts.apikey", "audit.auditentry"]
    assert upgraded["tables"] == ["agentsite_apikey", "agentsite_auditentry"]
    after = json.loads(
        manage(
            environ,
            "shell",
            "-c",
            "import json; from django.contrib.contenttypes.models"
            " import ContentType as C; print(json.dumps({c.model: c.pk for c in"
            " C.objects.filter(app_label__in=['accounts', 'audit'])}))",
        )
    )
    assert after == ids  # the same rows, relabelled: admin log entries and group grants keep pointing at them

    # And back: the previous release's code would find its content types again.
    manage(environ, "migrate", "--noinput", "accounts", "zero")
    manage(environ, "migrate", "--noinput", "audit", "zero")
    back = json.loads(
        manage(
            environ,
            "shell",
            "-c",
            "import json; from django.contrib.contenttypes.models"
            " import ContentType as C; print(json.dumps({c.model: c.pk for c in"
            " C.objects.filter(model__in=['apikey', 'auditentry'])}))",
        )
    )
    assert back == ids
