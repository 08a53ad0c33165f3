import django.core.validators
from django.db import migrations, models

class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="RetentionPolicy",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("conversations", "conversations untouched for"),
                            ("uploads", "uploaded files' originals older than"),
                            ("events", "turns' event logs of conversations idle for"),
                            ("audit", "audit records older than"),
                            ("people", "conversations of people deactivated for"),
                        ],
                        max_length=20,
                        unique=True,
                        verbose_name="what",
                    ),
                ),
                (
                    "days",
                    models.PositiveIntegerField(
                        validators=[django.core.validators.MinValueValidator(1)], verbose_name="days"
                    ),
                ),
                ("enabled", models.BooleanField(default=False, verbose_name="switched on")),
                ("last_run_at", models.DateTimeField(blank=True, null=True, verbose_name="last applied")),
                ("last_report", models.JSONField(blank=True, default=dict, verbose_name="last removed")),
            ],
            options={
                "verbose_name": "retention policy",
                "verbose_name_plural": "retention policies",
                "ordering": ["pk"],
            },
        ),
    ]
