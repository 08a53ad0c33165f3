"""The team library's model is the library app's now (library's migration
0001): agents forgets it, and its table stays for the library."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0018_http_secret_origin"),
        ("library", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="LibraryDocument")],
            database_operations=[],
        ),
    ]
