from __future__ import annotations

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

NAME_VALIDATOR = django.core.validators.RegexValidator(
    "^[A-Za-z0-9_-]{1,64}$", "Use 1-64 letters, digits, '_' or '-'."
)


class Migration(migrations.Migration):
    initial = True
    dependencies = []

    operations = [
        migrations.CreateModel(
            name="Provider",
            fields=[
                ("id", models.CharField(max_length=64, primary_key=True, serialize=False, validators=[NAME_VALIDATOR])),
                ("name", models.CharField(max_length=200)),
                ("base_url", models.URLField(max_length=500)),
                ("api_key", models.CharField(blank=True, max_length=500)),
                ("model_list", models.JSONField(blank=True, default=list)),
                ("default_model", models.CharField(blank=True, max_length=200)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={"ordering": ["id"]},
        ),
        migrations.CreateModel(
            name="Agent",
            fields=[
                ("name", models.CharField(max_length=64, primary_key=True, serialize=False, validators=[NAME_VALIDATOR])),
                ("description", models.TextField(blank=True)),
                ("system_prompt", models.TextField(blank=True)),
                ("model", models.CharField(blank=True, max_length=200)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "provider",
                    models.ForeignKey(
                        blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to="agents.provider"
                    ),
                ),
            ],
            options={"ordering": ["name"]},
        ),
        migrations.CreateModel(
            name="SiteDefault",
            fields=[
                ("id", models.PositiveSmallIntegerField(default=1, editable=False, primary_key=True, serialize=False)),
                ("model", models.CharField(blank=True, max_length=200)),
                (
                    "provider",
                    models.ForeignKey(
                        blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to="agents.provider"
                    ),
                ),
            ],
            options={
                "verbose_name": "site default model",
                "constraints": [models.CheckConstraint(condition=models.Q(id=1), name="site_default_single_row")],
            },
        ),
    ]
