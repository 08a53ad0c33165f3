"""Exporting a conversation from the browser: the Export menu's three downloads,
read back as a person's programs would read them."""

import io
import zipfile

import docx
import pytest
from playwright.sync_api import expect

from tests.e2e.test_first_turn import sign_in

pytestmark = pytest.mark.e2e

ANSWER = "## 热泵的效率\n\n空气源热泵在**零度以下**仍然有效。"
REPORT = "# 报告\n\n地源热泵安装更贵。"


def _download(page, name: str):
    if not page.locator("details.head-menu").evaluate("menu => menu.open"):
        page.locator("details.head-menu > summary").click()
    menu = page.locator(".export-menu")
    if not menu.evaluate("menu => menu.open"):
        menu.locator("summary").click()
    with page.expect_download() as info:
        page.get_by_role("link", name=name).click()
    download = info.value
    return download.suggested_filename, download.path().read_bytes()


def test_the_export_menu_downloads_markdown_word_and_a_zip_with_the_artifacts(portal, new_page):
    user = portal.users[0]
    code = f"from tests.e2e import seed; print(seed.copyable_conversation(username={user.username!r}, answer={ANSWER!r}, report={REPORT!r}))"
    conversation_id = portal.shell(code).strip()
    page = new_page()
    sign_in(page, portal=portal, user=user)
    page.goto(f"{portal.base_url}/c/{conversation_id}/")
    expect(page.locator("article.turn .answer")).to_contain_text("零度以下")

    name, markdown = _download(page, "Markdown (.md)")
    assert name.endswith(".md") and "空气源热泵在**零度以下**仍然有效。" in markdown.decode()

    name, word = _download(page, "Word document (.docx)")
    document = docx.Document(io.BytesIO(word))
    assert name.endswith(".docx")
    assert document.core_properties.author == user.username
    assert document.core_properties.title == "A thread of 1 turns"
    assert any("空气源热泵在零度以下仍然有效。" in paragraph.text for paragraph in document.paragraphs)

    name, archive = _download(page, "With artifacts (.zip)")
    with zipfile.ZipFile(io.BytesIO(archive)) as files:
        names = files.namelist()
        assert name.endswith(".zip") and "conversation.md" in names
        report = next(n for n in names if n.startswith("artifacts/research_report"))
        assert files.read(report).decode() == REPORT
        assert "零度以下" in files.read("conversation.md").decode()
