import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0007_conversation_share"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="pinned_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        # The column is added without a default: SQLite adds a nullable one in
        # place, where a default would rebuild the table under the search
        # views of migration 0004. Existing conversations keep null (nothing
        # of theirs is news); new ones get the model's default.
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.AddField(
                    model_name="conversation",
                    name="seen_at",
                    field=models.DateTimeField(blank=True, null=True),
                ),
            ],
            state_operations=[
                migrations.AddField(
                    model_name="conversation",
                    name="seen_at",
                    field=models.DateTimeField(blank=True, null=True, default=django.utils.timezone.now),
                ),
            ],
        ),
    ]
