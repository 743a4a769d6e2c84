"""`Message.status` takes only the statuses the code writes (chat/statuses.py), now also in the database. Rows
keep their values: every value any version wrote is one of them (tests/chat/test_message_status.py)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0008_message_error'),
    ]

    operations = [
        migrations.AlterField(
            model_name='message',
            name='status',
            field=models.CharField(choices=[('pending', 'Pending'), ('running', 'Running'), ('steered', 'Steered'), ('removed', 'Removed'), ('closed', 'Closed'), ('completed', 'Completed'), ('cancelled', 'Cancelled'), ('error', 'Error'), ('interrupted', 'Interrupted'), ('streaming', 'Streaming')], default='completed', max_length=16),
        ),
        migrations.AddConstraint(
            model_name='message',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'running', 'steered', 'removed', 'closed', 'completed', 'cancelled', 'error', 'interrupted', 'streaming'])), name='chat_message_status_known'),
        ),
    ]
