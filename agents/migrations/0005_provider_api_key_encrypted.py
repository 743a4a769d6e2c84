"""Provider API keys encrypted at rest (docs/protocol.md §6.3).

The column becomes text (a Fernet token is longer than the key), the stored keys are encrypted while the
field is still a plain text field (read and written raw), then the field becomes the encrypted one. The
reverse decrypts them again (it needs the key they were encrypted with).
"""

from django.db import migrations, models

import security.secret_fields
from security.secret_fields import decrypt_column, encrypt_column


def encrypt_keys(apps, schema_editor):
    encrypt_column(apps.get_model("agents", "Provider"), "api_key")


def decrypt_keys(apps, schema_editor):
    decrypt_column(apps.get_model("agents", "Provider"), "api_key")


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0004_agent_sandbox_network"),
    ]

    operations = [
        migrations.AlterField(
            model_name="provider",
            name="api_key",
            field=models.TextField(blank=True),
        ),
        migrations.RunPython(encrypt_keys, decrypt_keys),
        migrations.AlterField(
            model_name="provider",
            name="api_key",
            field=security.secret_fields.EncryptedTextField(blank=True),
        ),
    ]
