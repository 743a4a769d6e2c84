"""Every write of site configuration as an audit entry: who, what, before and after (docs/protocol.md §6.4).

Apps name the models that are site configuration (`track` in their AppConfig.ready: agents, providers, the
site default, tool switches, ACP runners; users and groups here), and every save and delete of such a row
— through REST, the admin, a page or a command — writes `config.create`, `config.update` (only the fields
that changed, before and after) or `config.delete` from Django's model signals.

The entry is written on the connection and in the transaction of the write itself: the writers of site
configuration make their change in a transaction (the REST views, the services, the admin's views), so
the change and its entry commit together or not at all.

Secrets never reach an entry: an encrypted field (security/secret_fields.py) and any field named
`secret` (a password's hash) show `"***"` when set and `""` when not; an encrypted JSON object keeps its
keys (`{"TOKEN": "***"}`), as its write-only form does. That a secret changed is recorded, never its value.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save

from audit.actions import CONFIG_CREATE, CONFIG_DELETE, CONFIG_UPDATE
from audit.services import audit_record
from security.secret_fields import ENCRYPTED_FIELDS

MASK = "***"
_BEFORE = "_audit_before"  # stashed on the instance between pre_save and post_save
_UNTRACKED = object()


@dataclass(frozen=True)
class Tracked:
    object_type: str
    object_id: Callable[[Any], str]
    fields: tuple[str, ...]  # the fields an entry shows
    secret: frozenset[str]  # of those, the ones shown masked
    m2m: tuple[str, ...]


_tracked: dict[type[models.Model], Tracked] = {}
_through: dict[type[models.Model], tuple[type[models.Model], str]] = {}


def track(
    model: type[models.Model],
    *,
    object_type: str,
    object_id: Callable[[Any], str] | None = None,
    exclude: tuple[str, ...] = (),
    secret: tuple[str, ...] = (),
    m2m: tuple[str, ...] = (),
) -> None:
    """Record every save and delete of `model` (idempotent). `exclude`: fields whose changes are noise
    (`updated_at`, `last_login`); `secret`: fields masked besides the encrypted ones; `m2m`: many-to-many
    fields whose changes are recorded too (a user's permissions)."""
    meta = model._meta
    fields = tuple(field.name for field in meta.concrete_fields if field.name not in exclude)
    masked = {field.name for field in meta.concrete_fields if isinstance(field, ENCRYPTED_FIELDS)}
    _tracked[model] = Tracked(
        object_type=object_type,
        object_id=object_id or (lambda instance: str(instance.pk)),
        fields=fields,
        secret=frozenset(masked | set(secret)),
        m2m=m2m,
    )
    uid = f"audit-{meta.label}"
    pre_save.connect(_before_save, sender=model, dispatch_uid=f"{uid}-pre")
    post_save.connect(_after_save, sender=model, dispatch_uid=f"{uid}-post")
    post_delete.connect(_after_delete, sender=model, dispatch_uid=f"{uid}-delete")
    for name in m2m:
        through = getattr(model, name).through
        _through[through] = (model, name)
        m2m_changed.connect(_m2m_changed, sender=through, dispatch_uid=f"{uid}-{name}")


# -- values ------------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A field's value as JSON data (dates as text, decimals as strings, a foreign key as its pk)."""
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def _masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(key): MASK for key in value}
    return MASK if value else ""


def _snapshot(spec: Tracked, instance: models.Model) -> dict[str, Any]:
    """Field name → value as stored (a foreign key as its pk), secrets in clear: compare, then `_shown`."""
    fields = {field.name: field for field in instance._meta.concrete_fields}
    return {name: _plain(fields[name].value_from_object(instance)) for name in spec.fields}


def _shown(spec: Tracked, values: dict[str, Any]) -> dict[str, Any]:
    return {name: _masked(value) if name in spec.secret else value for name, value in values.items()}


def _record(spec: Tracked, instance: Any, action: str, details: dict[str, Any], changed: list[str]) -> None:
    noun = spec.object_type.replace("_", " ")
    verb = {CONFIG_CREATE: "created", CONFIG_UPDATE: "changed", CONFIG_DELETE: "deleted"}[action]
    summary = f"{noun} '{instance}' {verb}" + (f": {', '.join(changed)}" if changed else "")
    audit_record(
        action,
        object_type=spec.object_type,
        object_id=spec.object_id(instance),
        summary=summary,
        details=details,
    )


# -- the signals -------------------------------------------------------------------------------------------


def _before_save(sender: type[models.Model], instance: Any, raw: bool = False, **kwargs: Any) -> None:
    spec = _tracked.get(sender)
    update_fields = kwargs.get("update_fields")
    if spec is None or raw or (update_fields is not None and not set(update_fields) & set(spec.fields)):
        instance.__dict__[_BEFORE] = _UNTRACKED  # a fixture load, or only untracked fields (last_login)
        return
    stored = None
    if instance.pk is not None:
        stored = sender._default_manager.using(kwargs.get("using")).filter(pk=instance.pk).first()
    instance.__dict__[_BEFORE] = _snapshot(spec, stored) if stored is not None else None


def _after_save(sender: type[models.Model], instance: Any, raw: bool = False, **kwargs: Any) -> None:
    spec = _tracked.get(sender)
    before = instance.__dict__.pop(_BEFORE, _UNTRACKED)
    if spec is None or raw or before is _UNTRACKED:
        return
    after = _snapshot(spec, instance)
    if before is None:
        _record(spec, instance, CONFIG_CREATE, {"after": _shown(spec, after)}, [])
        return
    update_fields = kwargs.get("update_fields")
    changed = [
        name
        for name in spec.fields
        if after[name] != before.get(name) and (update_fields is None or name in update_fields)
    ]
    if not changed:
        return
    details = {
        "changed": changed,
        "before": _shown(spec, {name: before.get(name) for name in changed}),
        "after": _shown(spec, {name: after[name] for name in changed}),
    }
    _record(spec, instance, CONFIG_UPDATE, details, changed)


def _after_delete(sender: type[models.Model], instance: Any, **kwargs: Any) -> None:
    spec = _tracked.get(sender)
    if spec is not None:
        _record(spec, instance, CONFIG_DELETE, {"before": _shown(spec, _snapshot(spec, instance))}, [])


def _m2m_changed(
    sender: type[models.Model], instance: Any, action: str, reverse: bool, **kwargs: Any
) -> None:
    """A tracked many-to-many field (a user's groups or permissions) changed from the tracked side."""
    owner = _through.get(sender)
    if owner is None or reverse or not isinstance(instance, owner[0]):
        return  # changed from the other side (group.user_set.add(...)): not followed
    model, name = owner
    key = f"_audit_m2m_{name}"
    if action in ("pre_add", "pre_remove", "pre_clear"):
        instance.__dict__[key] = _related(instance, name)
        return
    if action not in ("post_add", "post_remove", "post_clear") or key not in instance.__dict__:
        return
    before = instance.__dict__.pop(key)
    after = _related(instance, name)
    if after != before:
        details = {"changed": [name], "before": {name: before}, "after": {name: after}}
        _record(_tracked[model], instance, CONFIG_UPDATE, details, [name])


def _related(instance: Any, name: str) -> list[str]:
    """The related rows by name: a permission as `app_label.codename`, anything else as its str()."""
    rows = getattr(instance, name).all()
    if rows.model.__name__ == "Permission":
        return sorted(
            f"{row.content_type.app_label}.{row.codename}" for row in rows.select_related("content_type")
        )
    return sorted(str(row) for row in rows)
