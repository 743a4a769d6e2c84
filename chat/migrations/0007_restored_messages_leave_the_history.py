"""A steered message restored to the queue kept its place in the history and was listed as `pending`; a
running message of a session closed from another process's side was listed as `closed`. Neither status is
one of the history's (docs/protocol.md extensions "Messages"): the first leaves the history until its own
turn starts (chat/store.py now does so), the second reads `cancelled`, as closing a session cancels its turn."""

from django.db import migrations


def forwards(apps, schema_editor):
    Message = apps.get_model("chat", "Message")
    listed = Message.objects.filter(role="user", entered_at__isnull=False)
    listed.filter(status="pending").update(entered_at=None)
    listed.filter(status="closed").update(status="cancelled")


class Migration(migrations.Migration):
    dependencies = [("chat", "0006_usage")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop, elidable=True)]
