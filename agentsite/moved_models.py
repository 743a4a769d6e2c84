"""A model that moved to another app keeps its table; its content type (and so its permissions, admin log
entries and group grants) follows it to the new app label. Used by the moving apps' first migrations."""

from __future__ import annotations

from typing import Any

from django.db.migrations import RunPython


def follow_content_type(old_label: str, new_label: str, model: str) -> RunPython:
    def forward(apps: Any, schema_editor: Any) -> None:
        _relabel(apps, schema_editor, old_label, new_label, model)

    def backward(apps: Any, schema_editor: Any) -> None:
        _relabel(apps, schema_editor, new_label, old_label, model)

    return RunPython(forward, backward)


def _relabel(apps: Any, schema_editor: Any, old_label: str, new_label: str, model: str) -> None:
    from django.contrib.contenttypes.models import ContentType as LiveContentType

    content_types = apps.get_model("contenttypes", "ContentType").objects.using(
        schema_editor.connection.alias
    )
    if content_types.filter(app_label=new_label, model=model).exists():
        return  # already there (made by hand): nothing to move
    content_types.filter(app_label=old_label, model=model).update(app_label=new_label)
    LiveContentType.objects.clear_cache()
