"""The lead model a conversation chose (agents.llm.config, [lead] choices).

Adding a NOT NULL column makes Django rebuild the table on SQLite, which
SQLite refuses while the search index's views and triggers name it: they are
dropped before and made again after (0003 explains). Postgres adds the column
in place and keeps its index.
"""

import importlib

from django.db import migrations, models

search = importlib.import_module("conversations.migrations.0004_search_cjk")


def _on_sqlite(step):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            step(apps, schema_editor)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0004_search_cjk"),
    ]

    operations = [
        migrations.RunPython(_on_sqlite(search.search_index_drop), _on_sqlite(search.search_index_create)),
        migrations.AddField(
            model_name="conversation",
            name="lead_model",
            field=models.CharField(blank=True, max_length=100),
        ),
        migrations.RunPython(_on_sqlite(search.search_index_create), _on_sqlite(search.search_index_drop)),
    ]
