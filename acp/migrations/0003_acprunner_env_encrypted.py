"""Runner `env` values encrypted at rest (docs/protocol.md §6.3); the variable names stay in clear.

The stored values are encrypted while the field is still a plain JSON field (read and written raw), then
the field becomes the encrypted one (same column type). The reverse decrypts them again (it needs the key
they were encrypted with).
"""

from django.db import migrations

import security.secret_fields
from security.secret_fields import decrypt_column, encrypt_column


def encrypt_env(apps, schema_editor):
    encrypt_column(apps.get_model("acp", "AcpRunner"), "env")


def decrypt_env(apps, schema_editor):
    decrypt_column(apps.get_model("acp", "AcpRunner"), "env")


class Migration(migrations.Migration):
    dependencies = [
        ("acp", "0002_acprunner_sandbox_paths"),
    ]

    operations = [
        migrations.RunPython(encrypt_env, decrypt_env),
        migrations.AlterField(
            model_name="acprunner",
            name="env",
            field=security.secret_fields.EncryptedJSONDictField(blank=True, default=dict),
        ),
    ]
