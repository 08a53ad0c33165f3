import factory
from django.contrib.auth import get_user_model

from agents.models import Run
from artifacts.models import ArtifactSession
from conversations.models import Conversation, Message

PASSWORD = "pw-for-tests"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password(PASSWORD)


class ConversationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Conversation
        skip_postgeneration_save = True

    owner = factory.SubFactory(UserFactory)
    title = factory.Sequence(lambda n: f"Conversation {n}")
    session = factory.RelatedFactory(
        "tests.factories.ArtifactSessionFactory", factory_related_name="conversation"
    )


class ArtifactSessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ArtifactSession


class MessageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Message

    conversation = factory.SubFactory(ConversationFactory)
    content = factory.Sequence(lambda n: f"Question {n}?")


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Run

    message = factory.SubFactory(MessageFactory)
