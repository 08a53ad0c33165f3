import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def provider_groups_keep_their_claim(apps, schema_editor):
    """Before, a provider group was filled by the claim value of its own name:
    it still is, so a deployment's groups keep their members. An admin's group
    the provider took over that way is listed among the provider groups, where
    the admin may delete it (docs/sso.md)."""
    for row in apps.get_model("accounts", "ProviderGroup").objects.select_related("group"):
        row.claim = row.group.name
        row.save(update_fields=["claim"])


def provider_memberships_record(apps, schema_editor):
    """Before, a sign-in took its user out of any provider group the claim no
    longer named: each such membership of someone who signs in through the
    provider is recorded as the provider's, so it ends as it would have, and
    no other does. A member without a provider identity never signed in
    through it: theirs is an admin's."""
    through = apps.get_model(settings.AUTH_USER_MODEL)._meta.get_field("groups").remote_field.through
    ProviderMembership = apps.get_model("accounts", "ProviderMembership")
    pairs = (
        through.objects.filter(group__provider__isnull=False, user__provider_identities__isnull=False)
        .values_list("user_id", "group_id")
        .distinct()
    )
    ProviderMembership.objects.bulk_create(
        [ProviderMembership(user_id=user_id, group_id=group_id) for user_id, group_id in pairs], batch_size=1000
    )


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_provider_identity"),
        ("auth", "0012_alter_user_first_name_max_length"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="providergroup",
            options={"verbose_name": "provider group", "verbose_name_plural": "provider groups"},
        ),
        migrations.AddField(
            model_name="providergroup",
            name="claim",
            field=models.CharField(default="", max_length=150),
            preserve_default=False,
        ),
        migrations.RunPython(provider_groups_keep_their_claim, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="providergroup",
            name="claim",
            field=models.CharField(
                help_text="A value of the groups claim, exactly as the provider sends it.",
                max_length=150,
                unique=True,
                verbose_name="claim value",
            ),
        ),
        migrations.CreateModel(
            name="ProviderMembership",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "group",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="provider_memberships",
                        to="auth.group",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="provider_memberships",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "provider membership",
                "verbose_name_plural": "provider memberships",
                "constraints": [models.UniqueConstraint(fields=("user", "group"), name="provider_membership_unique")],
            },
        ),
        migrations.RunPython(provider_memberships_record, migrations.RunPython.noop),
    ]
