"""Workspaces move from folders named by the session id to folders named by a digest of owner and id.

Before: a session id of 1-64 of [A-Za-z0-9_-] was the folder name, any other id `s-<first 32 hex
of sha256(id)>` — and a user could create a session whose plain id was another session's hashed name,
and share its folder. After: `sha256("<user id>:<session id>")`, 64 hex digits (docs/protocol.md §6.1).
Where two sessions mapped to one old folder, the session created first keeps it.
"""

import hashlib
import re
from pathlib import Path

from django.conf import settings
from django.db import migrations

_PLAIN = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _old_name(session_id):
    if _PLAIN.fullmatch(session_id):
        return session_id
    return "s-" + hashlib.sha256(session_id.encode()).hexdigest()[:32]


def _new_name(user_id, session_id):
    return hashlib.sha256(f"{user_id}:{session_id}".encode()).hexdigest()


def _moves(apps):
    root = Path(settings.WORKSPACES_DIR)
    if not root.is_dir():
        return root, []
    Session = apps.get_model("chat", "Session")
    claimed = set()
    moves = []
    for session_id, user_id in Session.objects.order_by("created_at", "id").values_list("id", "user_id"):
        old = _old_name(session_id)
        if old in claimed:
            continue
        claimed.add(old)
        moves.append((old, _new_name(user_id, session_id)))
    return root, moves


def forwards(apps, schema_editor):
    root, moves = _moves(apps)
    for old, new in moves:
        source, target = root / old, root / new
        if source.is_dir() and not source.is_symlink() and not target.exists():
            source.rename(target)


def backwards(apps, schema_editor):
    root, moves = _moves(apps)
    for old, new in moves:
        source, target = root / new, root / old
        if source.is_dir() and not target.exists():
            source.rename(target)


class Migration(migrations.Migration):
    dependencies = [("chat", "0002_session_owner_token")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
