"""Model fields whose values the database holds only as Fernet tokens (docs/protocol.md §6.3).

- :class:`EncryptedTextField`: one secret (a provider's API key). The empty string stays empty: that
  no value is set is not a secret, and "is one set?" needs no key.
- :class:`EncryptedJSONDictField`: a JSON object whose *values* are secrets (a runner's `env`, an MCP
  server's `env` and `headers`). The names stay in clear, so a write-only form can show which variables
  are set ("***") even when a value cannot be decrypted; each value is a token of its own.

Both decrypt when a row is loaded and encrypt when it is saved, so code reads and writes clear strings.
Keys and what happens to a value no key opens: security/encryption.py. Filtering on these columns is
refused (FieldError) except `isnull`: tokens are random, so an `exact` lookup could never match.

Write-only in responses: such values show as :data:`SECRET_MASK`, and :func:`unmasked` puts the stored
values back where a client sent the mask (so what was read can be written back).

Also here, for migrations and `manage.py rotate_secrets`: :func:`encrypt_column` / :func:`decrypt_column`
(a data migration between a clear column and an encrypted one) and :func:`rotate_column`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.functions import Cast

from security.encryption import Sealed, SecretUnreadable, decrypt, encrypt, reseal, unreadable_message

_ALLOWED_LOOKUPS = frozenset({"isnull"})
SECRET_MASK = "***"  # what responses show instead of a secret value (write-only)
MASK_HELP = f'Stored values show as "{SECRET_MASK}"; leave them so to keep them.'  # forms' help text


class MaskWithoutValue(ValueError):
    """A value was sent as the mask for a name that has no stored value to keep."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def unmasked(sent: Mapping[str, str], stored: Mapping[str, str]) -> dict[str, str]:
    """`sent` with every value equal to the mask replaced by the stored value of that name (a client may
    PUT back what it read without wiping the secrets it was never shown). MaskWithoutValue when a masked
    name has no stored value."""
    kept: dict[str, str] = {}
    for key, value in sent.items():
        if value == SECRET_MASK:
            if key not in stored:
                raise MaskWithoutValue(key)
            value = stored[key]
        kept[key] = value
    return kept


def _seal(value: str) -> str:
    return str(value) if isinstance(value, Sealed) else encrypt(value)


class EncryptedTextField(models.TextField):
    """A text secret: clear in Python, a Fernet token in the database."""

    description = "Text stored encrypted (Fernet)"

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None or value == "":
            return value
        return decrypt(value)

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if value is None or value == "":
            return value
        return _seal(value)

    def get_lookup(self, lookup_name: str) -> Any:
        return super().get_lookup(lookup_name) if lookup_name in _ALLOWED_LOOKUPS else None

    def get_transform(self, lookup_name: str) -> Any:
        return None

    def formfield(self, **kwargs: Any) -> Any:  # type: ignore[override]
        """Write-only in every form: the stored value is never rendered back into a page."""
        defaults = {"form_class": forms.CharField, "widget": forms.PasswordInput(render_value=False)}
        return super().formfield(**{**defaults, **kwargs})


class EncryptedJSONDictField(models.JSONField):
    """A JSON object of strings whose values are secrets: {name: clear} in Python, {name: token} stored."""

    description = "A JSON object whose values are stored encrypted (Fernet)"

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        value = super().from_db_value(value, expression, connection)
        if not isinstance(value, dict):
            return value  # a row edited by hand: the reader's validation names it
        return {key: decrypt(item) if isinstance(item, str) else item for key, item in value.items()}

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, dict):
            value = {key: _seal(item) if isinstance(item, str) else item for key, item in value.items()}
        return super().get_prep_value(value)

    def validate(self, value: Any, model_instance: Any) -> None:
        super().validate(value, model_instance)
        if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
            raise ValidationError("A JSON object whose values are strings.", code="invalid")

    def get_lookup(self, lookup_name: str) -> Any:
        return super().get_lookup(lookup_name) if lookup_name in _ALLOWED_LOOKUPS else None

    def get_transform(self, lookup_name: str) -> Any:
        return None


ENCRYPTED_FIELDS = (EncryptedTextField, EncryptedJSONDictField)


# -- migrations and rotation ------------------------------------------------------------------------


def encrypt_column(model: type[models.Model], field_name: str) -> int:
    """A data migration's forward step: encrypt a column that holds clear values (text, or a JSON object
    of strings), read and written raw through the migration's historical model. Rows changed."""
    changed = 0
    for pk, value in model._default_manager.values_list("pk", field_name):
        if isinstance(value, dict):
            new: Any = {key: encrypt(item) if isinstance(item, str) else item for key, item in value.items()}
        elif isinstance(value, str) and value:
            new = encrypt(value)
        else:
            continue
        model._default_manager.filter(pk=pk).update(**{field_name: new})
        changed += 1
    return changed


def decrypt_column(model: type[models.Model], field_name: str) -> int:
    """The reverse: back to clear values. A value no key opens stops it (SecretUnreadable)."""
    changed = 0
    label = f"{model._meta.label}.{field_name}"
    for pk, value in model._default_manager.values_list("pk", field_name):
        if isinstance(value, dict):
            new: Any = {key: _opened(item, f"{label} of row {pk}") for key, item in value.items()}
        elif isinstance(value, str) and value:
            new = _opened(value, f"{label} of row {pk}")
        else:
            continue
        model._default_manager.filter(pk=pk).update(**{field_name: new})
        changed += 1
    return changed


def _opened(token: Any, what: str) -> Any:
    if not isinstance(token, str):
        return token
    value = decrypt(token)
    if isinstance(value, Sealed):
        raise SecretUnreadable(unreadable_message(f"the value of {what}"))
    return value


@dataclass
class Rotation:
    """What `rotate_column` did: rows re-encrypted, rows already under the first key, rows with a value
    that no key opens (their pks; left as they are)."""

    rotated: int = 0
    current: int = 0
    unreadable: list[Any] = field(default_factory=list)


def rotate_column(model: type[models.Model], field_name: str) -> Rotation:
    """Re-encrypt every stored value of an encrypted field with the first key (idempotent).

    The tokens are read raw (cast to text, so the field does not decrypt them) and written back sealed.
    """
    result = Rotation()
    manager = model._default_manager
    is_dict = isinstance(model._meta.get_field(field_name), models.JSONField)
    raw = manager.annotate(_raw=Cast(field_name, output_field=models.TextField()))
    for pk, text in raw.values_list("pk", "_raw"):
        if not text:
            continue
        stored = json.loads(text) if is_dict else {"": text}
        if not isinstance(stored, dict):
            result.unreadable.append(pk)
            continue
        new = {key: reseal(token) if isinstance(token, str) else token for key, token in stored.items()}
        if any(value is None for value in new.values()):
            result.unreadable.append(pk)
        elif new == stored:
            result.current += 1
        else:
            sealed = {key: Sealed(value) if isinstance(value, str) else value for key, value in new.items()}
            manager.filter(pk=pk).update(**{field_name: sealed if is_dict else sealed[""]})
            result.rotated += 1
    return result
