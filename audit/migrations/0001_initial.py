"""The audit trail, moved from the agentsite app with its table (`agentsite_auditentry`, kept), its indexes
and its content type."""

import django.utils.timezone
from django.db import migrations, models

from agentsite.moved_models import follow_content_type


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("agentsite", "0004_models_moved_to_their_apps"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AuditEntry",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("user_id", models.BigIntegerField(blank=True, null=True)),
                        ("username", models.CharField(blank=True, max_length=150)),
                        ("address", models.GenericIPAddressField(blank=True, null=True)),
                        ("action", models.CharField(max_length=40)),
                        ("object_type", models.CharField(blank=True, max_length=40)),
                        ("object_id", models.CharField(blank=True, max_length=300)),
                        ("summary", models.CharField(blank=True, max_length=500)),
                        ("details", models.JSONField(blank=True, default=dict)),
                    ],
                    options={
                        "verbose_name": "audit entry",
                        "verbose_name_plural": "audit trail",
                        "db_table": "agentsite_auditentry",
                        "ordering": ["-created_at", "-id"],
                        "indexes": [
                            models.Index(fields=["created_at", "id"], name="audit_created"),
                            models.Index(fields=["action", "created_at"], name="audit_action_created"),
                            models.Index(fields=["user_id", "created_at"], name="audit_user_created"),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        follow_content_type("agentsite", "audit", "auditentry"),
    ]
