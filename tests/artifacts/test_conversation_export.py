import io
import re
import zipfile

import docx
import pytest
from django.core.files.base import ContentFile

from artifacts import conversation_export
from artifacts.branches import branch_shown
from artifacts.conversation_export import (
    DOWNLOAD_NAME_MAX_BYTES,
    FILE_NAME_MAX_BYTES,
    conversation_docx,
    conversation_markdown,
    conversation_zip,
    safe_file_name,
)
from artifacts.manager import ArtifactManager
from artifacts.models import Artifact, ArtifactVersion
from artifacts.services import artifact_upload
from tests.factories import ConversationFactory, MessageFactory, UserFactory

pytestmark = pytest.mark.django_db


def _thread(conversation, turns):
    parent = None
    for question, answer in turns:
        parent = MessageFactory(conversation=conversation, parent=parent, content=question, response=answer)
    return parent


def _saved(conversation, artifact_id, content, *, content_type="text/markdown", title=""):
    manager = ArtifactManager(branch=branch_shown(conversation=conversation))
    manager.create(artifact_id=artifact_id, content=content, content_type=content_type, title=title)
    manager.flush_all()


def test_markdown_holds_the_branch_shown_in_order():
    conversation = ConversationFactory(title="热泵研究")
    first = _thread(conversation, [("热泵效率如何?", "## 结论\n\n很好。")])
    _thread(conversation, [("A branch not shown", "hidden answer")])
    MessageFactory(conversation=conversation, parent=first, content="第二个问题", response="第二个回答", shown=True)

    export = conversation_markdown(conversation=conversation)

    text = export.data.decode()
    assert export.filename == "热泵研究.md"
    assert text.startswith("# 热泵研究\n")
    assert text.index("热泵效率如何?") < text.index("## 结论") < text.index("第二个问题") < text.index("第二个回答")
    assert "hidden answer" not in text


def test_an_export_is_named_after_the_whole_title_and_a_title_too_long_for_a_file_says_it_was_cut():
    # The longest a question's title is (conversations.lifecycle.TITLE_LENGTH, and its "…"), in Chinese: 243 bytes.
    whole = "空气源热泵" * 16 + "…"
    conversation = ConversationFactory(title=whole)
    user = UserFactory()

    names = [
        conversation_markdown(conversation=conversation).filename,
        conversation_docx(conversation=conversation, user=user).filename,
        conversation_zip(conversation=conversation).filename,
    ]
    assert names == [f"{whole}.md", f"{whole}.docx", f"{whole}.zip"]

    # A rename may make it longer than any file system takes: cut to the bytes, and said.
    conversation.title = "报告" * 100
    name = conversation_docx(conversation=conversation, user=user).filename
    assert name.endswith("….docx") and name.startswith("报告" * 40) and len(name.encode()) <= DOWNLOAD_NAME_MAX_BYTES


def test_docx_names_its_author_and_title_and_keeps_the_structure():
    user = UserFactory(first_name="Ada", last_name="Lovelace")
    conversation = ConversationFactory(owner=user, title="Engines")
    _thread(conversation, [("What is it?", "- a list item\n\n**bold** words")])

    export = conversation_docx(conversation=conversation, user=user)

    document = docx.Document(io.BytesIO(export.data))
    properties = document.core_properties
    assert (properties.title, properties.author, properties.last_modified_by) == (
        "Engines",
        "Ada Lovelace",
        "Ada Lovelace",
    )
    styled = [(p.style.name, p.text) for p in document.paragraphs]
    assert styled[0] == ("Title", "Engines")
    assert ("Heading 2", "Question 1") in styled
    assert ("List Bullet", "a list item") in styled


def test_docx_author_falls_back_to_the_username():
    user = UserFactory(username="李雷")
    conversation = ConversationFactory(owner=user, title="")

    document = docx.Document(io.BytesIO(conversation_docx(conversation=conversation, user=user).data))

    assert document.core_properties.author == "李雷"
    assert document.core_properties.title == "Untitled"


def test_zip_holds_the_conversation_and_each_artifact_of_the_branch():
    conversation = ConversationFactory(title="Report work")
    _thread(conversation, [("Write it", "Done.")])
    _saved(conversation, "report", "# 报告\n\n正文")
    _saved(conversation, "script.py", "print(1)\n", content_type="text/x-python")
    _saved(conversation, "Report", "# same name, other case")

    with zipfile.ZipFile(io.BytesIO(conversation_zip(conversation=conversation).data)) as archive:
        names = archive.namelist()
        assert names == ["conversation.md", "artifacts/report.md", "artifacts/script.py", "artifacts/Report-2.md"]
        assert archive.read("artifacts/report.md").decode() == "# 报告\n\n正文"
        assert archive.read("conversation.md").decode().startswith("# Report work")


def test_zip_names_are_safe_whatever_the_artifact_is_called():
    conversation = ConversationFactory()
    message = _thread(conversation, [("q", "a")])
    # No NUL: Postgres cannot store one (test_safe_file_name has it).
    hostile = ["../x", "..\\..\\evil", "bell\x07tab\tline\n", "a" * 200, "报告" * 100, "CON", ".hidden", "///"]
    for number, artifact_id in enumerate(hostile):
        # Written around the validators, as a script could.
        artifact = Artifact.objects.create(
            session=conversation.artifact_session, artifact_id=artifact_id, title=f"t{number}", current_version=1
        )
        ArtifactVersion.objects.create(
            artifact=artifact, version=1, content=f"text {number}", message=message, update_type="create"
        )

    with zipfile.ZipFile(io.BytesIO(conversation_zip(conversation=conversation).data)) as archive:
        names = archive.namelist()

    assert len(names) == len(hostile) + 1 and len(set(names)) == len(names)
    for name in names[1:]:
        folder, file = name.split("/")
        assert folder == "artifacts"
        assert file and not file.startswith(".") and not re.search(r"[\x00-\x1f\\]", file) and ".." not in file
        assert len(file.encode()) <= FILE_NAME_MAX_BYTES
    assert "artifacts/_CON.md" in names


def test_zip_carries_an_uploaded_file_as_it_was_uploaded():
    conversation = ConversationFactory()
    _thread(conversation, [("q", "a")])
    artifact = Artifact.objects.create(
        session=conversation.artifact_session,
        artifact_id="chart.png",
        content_type="image/png",
        metadata={"original_name": "chart.png"},
        current_version=1,
    )
    artifact.file.save("chart.png", ContentFile(b"\x89PNG bytes"))
    ArtifactVersion.objects.create(artifact=artifact, version=1, content="", update_type="upload")

    with zipfile.ZipFile(io.BytesIO(conversation_zip(conversation=conversation).data)) as archive:
        assert archive.read("artifacts/chart.png") == b"\x89PNG bytes"


@pytest.mark.parametrize(
    ("name", "extension", "expected"),
    [
        ("report", ".md", "report.md"),
        ("notes.md", ".md", "notes.md"),
        ("../../etc/passwd", ".md", "etc_passwd.md"),
        ("", ".md", "fallback.md"),
        ("nul\x00byte", ".txt", "nulbyte.txt"),
        # Shown as "photoexe.zip" with the override; nothing that hides or reorders text is left.
        ("photo\u202egnp.exe", ".zip", "photognp.exe.zip"),
        ("\u2066報告\u2069\u200f\u061c\u200e\u200b\ufeff\u00ad", ".md", "報告.md"),
        ("\u202e\u202a\u202b\u202c\u202d", ".md", "fallback.md"),
        ("热泵的冬季表现", ".docx", "热泵的冬季表现.docx"),
        # 117 bytes of UTF-8 before the extension, the last three the ellipsis that says it was cut.
        ("报告" * 300, ".md", ("报告" * 20)[:38] + "….md"),
        ("a" * 300, ".md", "a" * 114 + "….md"),
    ],
)
def test_safe_file_name(name, extension, expected):
    assert safe_file_name(name, extension=extension, fallback="fallback") == expected


def _word_document(text: str) -> bytes:
    document = docx.Document()
    document.add_paragraph(text)
    data = io.BytesIO()
    document.save(data)
    return data.getvalue()


def test_zip_gives_back_each_uploaded_document_as_uploaded_beside_its_text():
    conversation = ConversationFactory()
    _thread(conversation, [("q", "a")])
    branch = branch_shown(conversation=conversation)
    word = _word_document("测试在零下十度进行。")
    # A name with folders and a right-to-left override: cleaned, never a path out of the folder.
    artifact_upload(branch=branch, filename="../../test_plan_热泵\u202e.docx", data=word)
    artifact_upload(branch=branch, filename="meeting_notes.txt", data="周一开会。".encode())

    with zipfile.ZipFile(io.BytesIO(conversation_zip(conversation=conversation).data)) as archive:
        names = archive.namelist()
        assert archive.read("uploads/test_plan_热泵.docx") == word
        assert archive.read("uploads/meeting_notes.txt") == "周一开会。".encode()
        # The text read out of the document, as the branch has it, stays beside it.
        assert "测试在零下十度进行。" in archive.read("artifacts/test_plan_热泵.docx.md").decode()
    assert sorted(names) == [
        "artifacts/meeting_notes.txt",
        "artifacts/test_plan_热泵.docx.md",
        "conversation.md",
        "uploads/meeting_notes.txt",
        "uploads/test_plan_热泵.docx",
    ]


def test_zip_names_the_uploads_too_large_to_carry(monkeypatch):
    conversation = ConversationFactory()
    _thread(conversation, [("q", "a")])
    branch = branch_shown(conversation=conversation)
    small, large = b"small notes", b"large notes " * 100
    artifact_upload(branch=branch, filename="small.txt", data=small)
    artifact_upload(branch=branch, filename="large.txt", data=large)
    monkeypatch.setattr(conversation_export, "UPLOADS_MAX_BYTES", len(small) + len(large) - 1)

    with zipfile.ZipFile(io.BytesIO(conversation_zip(conversation=conversation).data)) as archive:
        assert archive.read("uploads/small.txt") == small
        assert "uploads/large.txt" not in archive.namelist()
        assert archive.read("uploads/LEFT_OUT.txt").decode().splitlines()[1:] == ["large.txt"]
        # Its text is still there.
        assert archive.read("artifacts/large.txt").decode() == large.decode()
