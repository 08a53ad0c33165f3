from django.db import migrations


def titles_clean(apps, schema_editor):
    """Titles stored before every title was cleaned (a model's, a rename's,
    the question's) lose what hides or reorders text: a right-to-left
    override shown nine times on the page, and in the export's file name."""
    from artifactflow.names import name_line

    Conversation = apps.get_model("conversations", "Conversation")
    batch = []
    for conversation in Conversation.objects.exclude(title="").only("pk", "title").iterator(chunk_size=2000):
        title = name_line(conversation.title)
        if title != conversation.title:
            conversation.title = title
            batch.append(conversation)
    # A queryset's update: the list's order (updated_at) stays.
    Conversation.objects.bulk_update(batch, ["title"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0008_pinned_and_seen")]

    operations = [migrations.RunPython(titles_clean, migrations.RunPython.noop)]
