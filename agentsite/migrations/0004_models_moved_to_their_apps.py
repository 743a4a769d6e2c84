"""API keys moved to accounts/ and the audit trail to audit/ (docs/architecture.md): this app's state lets them
go; their tables stay as they are (accounts/migrations/0001, audit/migrations/0001 take them over)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("agentsite", "0003_api_key_expires_at"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel("ApiKey"), migrations.DeleteModel("AuditEntry")],
            database_operations=[],
        ),
    ]
