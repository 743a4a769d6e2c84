"""The `default` agent always exists (docs/protocol.md §2)."""

from __future__ import annotations

from django.db import migrations


def create_default_agent(apps, schema_editor):  # type: ignore[no-untyped-def]
    Agent = apps.get_model("agents", "Agent")
    Agent.objects.get_or_create(
        name="default",
        defaults={
            "description": "General-purpose assistant.",
            "system_prompt": "You are a helpful assistant. Answer clearly and concisely.",
        },
    )


class Migration(migrations.Migration):
    dependencies = [("agents", "0001_initial")]
    operations = [migrations.RunPython(create_default_agent, migrations.RunPython.noop)]
