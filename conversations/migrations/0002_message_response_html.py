from django.db import migrations, models


def render_stored_responses(apps, schema_editor):
    from artifactflow.markdown import markdown_render

    Message = apps.get_model("conversations", "Message")
    batch = []
    for message in Message.objects.exclude(response="").only("pk", "response").iterator(chunk_size=500):
        message.response_html = markdown_render(message.response)
        batch.append(message)
        if len(batch) == 500:
            Message.objects.bulk_update(batch, ["response_html"])
            batch = []
    Message.objects.bulk_update(batch, ["response_html"])


class Migration(migrations.Migration):
    dependencies = [("conversations", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="message",
            name="response_html",
            field=models.TextField(blank=True, editable=False),
        ),
        migrations.RunPython(render_stored_responses, migrations.RunPython.noop),
    ]
