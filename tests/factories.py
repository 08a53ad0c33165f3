import datetime
import io
import zipfile
import zlib

import docx
import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from agents.models import Run, TokenSpend, TokenUse
from artifacts.models import Artifact, ArtifactSession, ArtifactVersion
from conversations.models import Conversation, ConversationShare, Message
from library.models import LibraryDocument
from projects.models import Project, ProjectMember, Schedule

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
    session = factory.RelatedFactory("tests.factories.ArtifactSessionFactory", factory_related_name="conversation")


class ConversationShareFactory(factory.django.DjangoModelFactory):
    """A share with one user unless `group` or `everyone=True` is given instead."""

    class Meta:
        model = ConversationShare

    conversation = factory.SubFactory(ConversationFactory)
    user = factory.Maybe(
        factory.LazyAttribute(lambda share: share.group is None and not share.everyone),
        yes_declaration=factory.SubFactory(UserFactory),
        no_declaration=None,
    )
    group = None
    everyone = False


class ArtifactSessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ArtifactSession


class MessageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Message
        skip_postgeneration_save = True

    conversation = factory.SubFactory(ConversationFactory)
    content = factory.Sequence(lambda n: f"Question {n}?")

    @factory.post_generation
    def shown(message, create, extracted, **kwargs):
        """As a message posted is, the newest is the branch the page shows
        (`shown=False` leaves the conversation's alone)."""
        if create and extracted is not False:
            Conversation.objects.filter(pk=message.conversation_id).update(active_branch=message)
            message.conversation.active_branch = message


def message_chain(depth: int):
    """A conversation whose messages each answer the one before: one branch `depth` deep."""
    conversation = ConversationFactory()
    parent = None
    messages = []
    for i in range(depth):
        parent = MessageFactory(conversation=conversation, parent=parent, content=f"m{i}")
        messages.append(parent)
    return conversation, messages


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Run

    message = factory.SubFactory(MessageFactory)


class TokenSpendFactory(factory.django.DjangoModelFactory):
    """What a user's model calls spent today (agents.budgets)."""

    class Meta:
        model = TokenSpend

    user = factory.SubFactory(UserFactory)
    day = factory.LazyFunction(timezone.localdate)
    tokens = 0


class TokenUseFactory(factory.django.DjangoModelFactory):
    """A day's use of one model by one kind of call (agents.usage)."""

    class Meta:
        model = TokenUse

    user = factory.SubFactory(UserFactory)
    day = factory.LazyFunction(timezone.localdate)
    model = "deep-model"
    kind = "lead_agent"
    calls = 1
    input_tokens = 1_000
    output_tokens = 200


class ArtifactFactory(factory.django.DjangoModelFactory):
    """A run artifact (a stored tool result) as a turn saves it: its content is
    its one version's. `versions=[...]` saves older texts before it;
    `updated_at=` backdates it."""

    class Meta:
        model = Artifact
        skip_postgeneration_save = True

    session = factory.LazyFunction(lambda: ConversationFactory().artifact_session)
    artifact_id = factory.Sequence(lambda n: f"web_fetch_result_{n + 1}")
    title = factory.LazyAttribute(lambda artifact: f"web_fetch result ({artifact.artifact_id})")
    content_type = "text/xml"
    content = factory.Sequence(lambda n: f"<page>Stored result {n}</page>")
    source = Artifact.Source.RUN

    @factory.post_generation
    def versions(artifact, create, extracted, **kwargs):
        if not create:
            return
        texts = [*(extracted or []), artifact.content]
        ArtifactVersion.objects.bulk_create(
            ArtifactVersion(artifact=artifact, version=number, content=text, title=artifact.title, update_type="create")
            for number, text in enumerate(texts, start=1)
        )
        Artifact.objects.filter(pk=artifact.pk).update(current_version=len(texts))
        artifact.current_version = len(texts)

    @factory.post_generation
    def updated_at(artifact, create, extracted, **kwargs):
        # auto_now sets it on every save; only an update() writes another time.
        if create and extracted is not None:
            Artifact.objects.filter(pk=artifact.pk).update(updated_at=extracted)
            artifact.updated_at = extracted


class LibraryDocumentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LibraryDocument

    title = factory.Sequence(lambda n: f"Library document {n}")
    content = factory.Sequence(lambda n: f"The text of library document {n}.")


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project

    owner = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"Project {n}")


class ProjectMemberFactory(factory.django.DjangoModelFactory):
    """A reader of the project, a person unless `group` is given instead."""

    class Meta:
        model = ProjectMember

    project = factory.SubFactory(ProjectFactory)
    user = factory.Maybe(
        factory.LazyAttribute(lambda member: member.group is None),
        yes_declaration=factory.SubFactory(UserFactory),
        no_declaration=None,
    )
    group = None
    role = ProjectMember.Role.READER


class ScheduleFactory(factory.django.DjangoModelFactory):
    """A daily schedule at 09:00 in Shanghai, due now unless `next_run_at` says otherwise."""

    class Meta:
        model = Schedule

    conversation = factory.SubFactory(ConversationFactory)
    question = "What changed in the heat pump market this week?"
    frequency = Schedule.Frequency.DAILY
    time = datetime.time(9, 0)
    time_zone = "Asia/Shanghai"
    next_run_at = factory.LazyFunction(timezone.now)


def pdf_bytes(page_texts: list[str], *, title: str | None = None) -> bytes:
    """A small valid PDF with one line of Helvetica text per page."""
    page_count = len(page_texts)
    font_number = 3 + 2 * page_count
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Count %d /Kids [%s] >>"
        % (page_count, b" ".join(b"%d 0 R" % (3 + 2 * index) for index in range(page_count))),
    ]
    for index, text in enumerate(page_texts):
        content = zlib.compress(b"BT /F1 12 Tf 72 720 Td (%s) Tj ET" % text.encode("latin-1"))
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R"
            b" /Resources << /Font << /F1 %d 0 R >> >> >>" % (4 + 2 * index, font_number)
        )
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(content), content))
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    info = b""
    if title is not None:
        objects.append(b"<< /Title (%s) >>" % title.encode("latin-1"))
        info = b" /Info %d 0 R" % len(objects)

    return pdf_written(objects, info=info)


def pdf_sharing_one_stream(*, pages: int, content: bytes) -> bytes:
    """A PDF whose pages all draw one content stream, stored compressed once:
    a few kilobytes that make a reader parse `content` once per page."""
    stream = zlib.compress(content, 9)
    kids = b" ".join(b"%d 0 R" % (4 + index) for index in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Count %d /Kids [%s] >>" % (pages, kids),
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(stream), stream),
    ]
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R /Resources << /Font << /F1 %d 0 R >> >> >>"
    objects += [page % (4 + pages)] * pages
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return pdf_written(objects)


def pdf_written(objects: list[bytes], *, info: bytes = b"") -> bytes:
    """A PDF file of these objects, numbered from 1 (the catalog), with its cross-reference table."""
    pdf = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(pdf))
        pdf += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref_offset = len(pdf)
    pdf += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    pdf += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    pdf += b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, info, xref_offset)
    return bytes(pdf)


def docx_of_xml(body: bytes, *, repeat: int = 1) -> bytes:
    """A Word document (python-docx's own template) whose body is `body`
    `repeat` times over: 10 MB of repeated XML packs into some 60 KB, written
    in pieces so that it is never in memory whole."""
    template = io.BytesIO()
    docx.Document().save(template)
    head = (
        b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
    )
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(template) as source,
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive,
    ):
        for member in source.infolist():
            if member.filename != "word/document.xml":
                archive.writestr(member, source.read(member))
                continue
            with archive.open(member.filename, "w") as document:
                document.write(head)
                for done in range(0, repeat, 10_000):
                    document.write(body * min(10_000, repeat - done))
                document.write(b"</w:body></w:document>")
    return buffer.getvalue()
