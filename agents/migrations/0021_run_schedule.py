import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0020_token_use"),
        ("projects", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="schedule",
            field=models.ForeignKey(
                blank=True,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="runs",
                to="projects.schedule",
            ),
        ),
    ]
