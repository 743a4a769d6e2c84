"""Secrets at rest (docs/protocol.md §6.3): provider API keys and runner env values are stored encrypted,
read back clear by everything that uses them, survive a rotated-away key without breaking a list, and
`rotate_secrets` moves them to the first key.

The raw columns are read with SQL, past the model fields. The canary through a real server's database
file, WAL and a pg_dump is in tests/e2e/test_secrets_at_rest.py; the data migration in
tests/test_secrets_migration.py.
"""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import FieldError, ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import connection

from acp.models import AcpRunner
from agents.models import Agent, Provider
from agents.services import model_choice_for
from agentsite.env import env_fernet_keys
from security.encryption import (
    SecretUnreadable,
    UnreadableSecret,
    decrypt,
    derived_key,
    encrypt,
    reveal,
    site_keys,
)

pytestmark = pytest.mark.services_rerun  # the raw columns and the rotation's cast differ on Postgres (jsonb)

KEY_A = Fernet.generate_key().decode()
KEY_B = Fernet.generate_key().decode()
CANARY = "sk-canary-4f1d0c"
RUNNERS = "/api/v1/agents/default/config/acp"


def raw(sql: str, *params: Any) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def raw_key(provider_id: str) -> str:
    return raw("SELECT api_key FROM agents_provider WHERE id = %s", provider_id)


def raw_env(runner_id: int) -> dict[str, str]:
    value = raw("SELECT env FROM acp_acprunner WHERE id = %s", runner_id)
    return value if isinstance(value, dict) else json.loads(value)


@pytest.fixture
def provider(db: Any) -> Provider:
    return Provider.objects.create(id="p", name="P", base_url="http://127.0.0.1:9/v1", api_key=CANARY)


# --- keys ------------------------------------------------------------------------------------------


def test_keys_parse_comma_separated_and_a_bad_one_is_named_by_position_not_shown() -> None:
    assert env_fernet_keys("K", environ={"K": f" {KEY_A} , {KEY_B}"}) == [KEY_A, KEY_B]
    assert env_fernet_keys("K", environ={}) == []
    for bad in ["short", KEY_A[:-2] + "!!", KEY_A + "AAAA", "é" * 44]:
        with pytest.raises(ImproperlyConfigured, match=r"AGENTSITE_SECRETS_KEY: key 2 of 2") as info:
            env_fernet_keys("AGENTSITE_SECRETS_KEY", environ={"AGENTSITE_SECRETS_KEY": f"{KEY_A},{bad}"})
        assert bad not in str(info.value) and KEY_A not in str(info.value)


def test_without_a_configured_key_secrets_use_one_derived_from_secret_key(settings: Any) -> None:
    settings.AGENTSITE_SECRETS_KEYS = []
    token = encrypt("x")

    assert site_keys()[0] == derived_key(settings.SECRET_KEY)
    assert Fernet(derived_key(settings.SECRET_KEY)).decrypt(token.encode()) == b"x"
    assert derived_key("a") != derived_key("b") and derived_key("a") == derived_key("a")
    assert derived_key(settings.SECRET_KEY) != settings.SECRET_KEY


def test_a_changed_secret_key_kept_in_its_fallbacks_still_decrypts(settings: Any) -> None:
    settings.AGENTSITE_SECRETS_KEYS = []
    settings.SECRET_KEY = "old-" + "x" * 60
    token = encrypt("kept")
    settings.SECRET_KEY = "new-" + "y" * 60

    assert isinstance(decrypt(token), UnreadableSecret)
    settings.SECRET_KEY_FALLBACKS = ["old-" + "x" * 60]
    assert decrypt(token) == "kept"
    settings.AGENTSITE_SECRETS_KEYS = [KEY_A]  # set later: what was stored before stays readable
    assert decrypt(token) == "kept"


def test_the_first_key_encrypts_and_every_key_decrypts(settings: Any) -> None:
    settings.AGENTSITE_SECRETS_KEYS = [KEY_A]
    under_a = encrypt("old")
    settings.AGENTSITE_SECRETS_KEYS = [KEY_B, KEY_A]
    under_b = encrypt("new")

    assert decrypt(under_a) == "old" and decrypt(under_b) == "new"
    assert Fernet(KEY_B).decrypt(under_b.encode()) == b"new"
    settings.AGENTSITE_SECRETS_KEYS = [KEY_B]
    assert isinstance(decrypt(under_a), UnreadableSecret)
    with pytest.raises(SecretUnreadable, match="AGENTSITE_SECRETS_KEY"):
        reveal(decrypt(under_a), what="the key of X")


def test_a_malformed_key_stops_the_server_at_start_up(tmp_path: Any) -> None:
    from tests.test_settings import base_environ, manage

    result = manage(base_environ(tmp_path, AGENTSITE_SECRETS_KEY="not-a-key"), "check")

    assert result.returncode != 0
    assert "AGENTSITE_SECRETS_KEY: key 1 of 1 is not a Fernet key" in result.stderr
    assert "not-a-key" not in result.stderr


# --- the fields --------------------------------------------------------------------------------------


def test_a_provider_key_is_stored_encrypted_and_read_back_clear(provider: Provider) -> None:
    stored = raw_key("p")

    assert CANARY not in stored and decrypt(stored) == CANARY
    assert Provider.objects.get(id="p").api_key == CANARY
    assert Provider.objects.values_list("api_key", flat=True).get(id="p") == CANARY
    assert model_choice_for(agent=Agent(name="x", provider=Provider.objects.get(id="p"))).api_key == CANARY


def test_an_empty_key_stays_empty_so_none_set_needs_no_key(db: Any) -> None:
    Provider.objects.create(id="local", name="L", base_url="http://127.0.0.1:9/v1")
    assert raw_key("local") == ""
    assert Provider.objects.get(id="local").api_key == ""


def test_filtering_on_an_encrypted_column_is_refused(provider: Provider) -> None:
    with pytest.raises(FieldError):
        list(Provider.objects.filter(api_key=CANARY))
    with pytest.raises(FieldError):
        list(AcpRunner.objects.filter(env__TOKEN="x"))
    assert Provider.objects.filter(api_key__isnull=False).count() == 1


def test_runner_env_values_are_stored_encrypted_names_in_clear(api: Any, staff_key: str) -> None:
    body = {"enabled": False, "command": "", "env": {"TOKEN": CANARY, "EMPTY": ""}}
    assert api(staff_key).put(f"{RUNNERS}/r", body).status_code == 200
    runner = AcpRunner.objects.get(name="r")

    stored = raw_env(runner.id)
    assert set(stored) == {"TOKEN", "EMPTY"}
    assert CANARY not in json.dumps(stored) and decrypt(stored["TOKEN"]) == CANARY
    assert runner.env == {"TOKEN": CANARY, "EMPTY": ""}
    assert runner.config().env == {"TOKEN": CANARY, "EMPTY": ""}
    assert api(staff_key).get(RUNNERS).json()["runners"]["r"]["env"] == {"TOKEN": "***", "EMPTY": "***"}


# --- a key rotated away --------------------------------------------------------------------------------


@pytest.fixture
def rotated_away(settings: Any, api: Any, staff_key: str) -> Any:
    """A provider key and a runner env value stored under KEY_A, then KEY_A replaced by KEY_B; the runner
    saved again with its masked TOKEN (kept as stored) and a new OTHER (under KEY_B)."""
    settings.AGENTSITE_SECRETS_KEYS = [KEY_A]
    created = api(staff_key).post("/api/v1/providers", {**_provider_body(), "api_key": CANARY})
    assert created.status_code == 201
    body = {"enabled": True, "command": "true", "env": {"TOKEN": CANARY, "OTHER": "old"}}
    assert api(staff_key).put(f"{RUNNERS}/r", body).status_code == 200
    settings.AGENTSITE_SECRETS_KEYS = [KEY_B]
    body["env"] = {"TOKEN": "***", "OTHER": "fine"}
    assert api(staff_key).put(f"{RUNNERS}/r", body).status_code == 200
    return settings


def _provider_body() -> dict[str, Any]:
    return {"id": "lost", "name": "Lost key", "base_url": "http://127.0.0.1:9/v1"}


def test_lists_still_load_when_a_value_cannot_be_decrypted(
    rotated_away: Any, api: Any, staff_key: str, client: Any, staff: Any
) -> None:
    providers = api(staff_key).get("/api/v1/providers")
    assert providers.status_code == 200
    assert providers.json()["results"][0]["api_key_set"] is True
    assert api(staff_key).get(RUNNERS).json()["runners"]["r"]["env"] == {"TOKEN": "***", "OTHER": "***"}
    staff.is_superuser = True
    staff.save()
    client.force_login(staff)
    page = client.get("/admin/agents/provider/")
    assert page.status_code == 200 and b"cannot be decrypted" in page.content
    assert client.get("/admin/agents/provider/lost/change/").status_code == 200
    assert client.get("/admin/acp/acprunner/").status_code == 200


def test_using_an_undecryptable_key_is_a_clear_error_not_a_crash(
    rotated_away: Any, api: Any, staff_key: str
) -> None:
    tested = api(staff_key).post("/api/v1/providers/lost/test")

    assert tested.status_code == 200
    assert tested.json()["ok"] is False and tested.json()["models"] == []
    assert tested.json()["error"]["code"] == "secret_unreadable"
    assert "AGENTSITE_SECRETS_KEY" in tested.json()["error"]["message"]
    config = AcpRunner.objects.get(name="r").config()
    assert config.env == {"OTHER": "fine"} and config.unreadable_env == ["TOKEN"]
    assert "TOKEN" in (config.unreadable_error() or "")


def test_saving_a_row_again_keeps_a_value_it_cannot_decrypt(
    rotated_away: Any, api: Any, staff_key: str
) -> None:
    assert api(staff_key).patch("/api/v1/providers/lost", {"name": "Renamed"}).status_code == 200

    rotated_away.AGENTSITE_SECRETS_KEYS = [KEY_B, KEY_A]  # the old key back: nothing was lost
    assert Provider.objects.get(id="lost").api_key == CANARY
    assert AcpRunner.objects.get(name="r").env == {"TOKEN": CANARY, "OTHER": "fine"}


# --- rotate_secrets ------------------------------------------------------------------------------------


def rotate() -> str:
    out = StringIO()
    call_command("rotate_secrets", stdout=out)
    return out.getvalue()


def test_rotate_secrets_moves_every_value_to_the_first_key_and_is_idempotent(
    settings: Any, api: Any, staff_key: str
) -> None:
    settings.AGENTSITE_SECRETS_KEYS = [KEY_A]
    Provider.objects.create(id="a", name="A", base_url="http://127.0.0.1:9/v1", api_key=CANARY)
    Provider.objects.create(id="empty", name="E", base_url="http://127.0.0.1:9/v1")
    assert api(staff_key).put(f"{RUNNERS}/r", {"env": {"TOKEN": CANARY}}).status_code == 200
    settings.AGENTSITE_SECRETS_KEYS = [KEY_B, KEY_A]

    first = rotate()
    second = rotate()

    assert "2 rows re-encrypted with the first key, 0 already current" in first
    assert "agents.Provider.api_key: 1 re-encrypted" in first
    assert "0 rows re-encrypted with the first key, 2 already current" in second
    runner = AcpRunner.objects.get(name="r")
    assert Fernet(KEY_B).decrypt(raw_key("a").encode()).decode() == CANARY
    assert Fernet(KEY_B).decrypt(raw_env(runner.id)["TOKEN"].encode()).decode() == CANARY
    settings.AGENTSITE_SECRETS_KEYS = [KEY_B]  # the old key can go now
    assert Provider.objects.get(id="a").api_key == CANARY
    assert AcpRunner.objects.get(name="r").env == {"TOKEN": CANARY}


def test_rotate_secrets_names_what_no_key_opens_and_leaves_it(rotated_away: Any) -> None:
    before = raw_key("lost")

    with pytest.raises(CommandError, match=r"agents\.Provider\.api_key of id='lost'"):
        rotate()
    assert raw_key("lost") == before
