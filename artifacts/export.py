"""Markdown artifacts exported as Word documents.

The markdown is parsed with markdown-it-py and its token stream is walked
once, appending to a python-docx document. Raw HTML is never interpreted:
it comes out as the literal text the author wrote, which Word cannot run.
A numbered citation ([1], artifactflow.citations) becomes a footnote naming
its source (and the words it quotes); the list of sources stays as written.
"""

import io
import re
from dataclasses import dataclass

import docx
from django.utils import timezone
from docx.enum.text import WD_ALIGN_PARAGRAPH
from docx.opc.constants import CONTENT_TYPE, RELATIONSHIP_TYPE
from docx.opc.packuri import PackURI
from docx.opc.part import XmlPart
from docx.oxml import OxmlElement, parse_xml
from docx.oxml.ns import nsdecls, qn
from docx.oxml.numbering import CT_Num
from docx.oxml.table import CT_Tbl
from docx.shared import Inches
from docx.table import Table
from docx.text.paragraph import Paragraph
from markdown_it.token import Token

from artifactflow.citations import Marker, citations_read
from artifactflow.markdown import markdown_tokens

MONOSPACE_FONT = "Courier New"  # on every Word and LibreOffice install

# The default template defines 'List Bullet'…'List Bullet 3', 'List Number'…'List Number 3'
# and 'List Continue'…'List Continue 3'; deeper lists reuse the third level.
_LIST_DEPTH_MAX = 3
_QUOTE_INDENT = Inches(0.4)
_PROPERTY_MAX_CHARS = 255

# lxml refuses these in text; markdown-it passes them through.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_TASK_MARKER = re.compile(r"\[([ xX])\]\s+")
_FORMAT_CHANGES = {
    "strong_open": ("bold", 1),
    "strong_close": ("bold", -1),
    "em_open": ("italic", 1),
    "em_close": ("italic", -1),
    "s_open": ("strike", 1),
    "s_close": ("strike", -1),
}
_ALIGNMENTS = {
    "text-align:left": WD_ALIGN_PARAGRAPH.LEFT,
    "text-align:center": WD_ALIGN_PARAGRAPH.CENTER,
    "text-align:right": WD_ALIGN_PARAGRAPH.RIGHT,
}


def docx_from_markdown(*, markdown: str, title: str = "", subtitle: str = "", author: str = "") -> bytes:
    """The markdown as a .docx file, headed by `title` and `subtitle` when given;
    its properties name `title` and `author` (else they would say "python-docx")."""
    writer = _DocxWriter()
    title = _XML_INVALID.sub("", title).strip()
    writer.properties_set(title=title, author=_XML_INVALID.sub("", author).strip())
    if title:
        writer.title_add(title)
    subtitle = _XML_INVALID.sub("", subtitle).strip()
    if subtitle:
        writer.subtitle_add(subtitle)
    writer.tokens_add(markdown_tokens(_XML_INVALID.sub("", markdown)))
    return writer.to_bytes()


@dataclass
class _List:
    ordered: bool
    num_id: int | None  # ordered lists get their own Word numbering, so each starts afresh


@dataclass
class _Cell:
    inline: Token | None
    header: bool
    alignment: WD_ALIGN_PARAGRAPH | None
    markers: dict[int, list[Marker]] | None = None


# A footnotes part as Word writes one: the two separators it draws above the notes, then the notes.
_FOOTNOTES_XML = (
    f"<w:footnotes {nsdecls('w')}>"
    '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>'
    '<w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p></w:footnote>'
    "</w:footnotes>"
)


class _Footnotes:
    """The document's footnotes, its part made at the first (python-docx has no footnote API)."""

    def __init__(self, document):
        self._document = document
        self._element = None
        self._next_id = 1

    def add(self, text: str) -> int:
        if self._element is None:
            part = XmlPart(
                PackURI("/word/footnotes.xml"),
                CONTENT_TYPE.WML_FOOTNOTES,
                parse_xml(_FOOTNOTES_XML),
                self._document.part.package,
            )
            self._document.part.relate_to(part, RELATIONSHIP_TYPE.FOOTNOTES)
            self._element = part.element
        footnote_id, self._next_id = self._next_id, self._next_id + 1
        note = parse_xml(
            f'<w:footnote {nsdecls("w")} w:id="{footnote_id}"><w:p><w:r><w:rPr><w:vertAlign w:val="superscript"/>'
            '</w:rPr><w:footnoteRef/></w:r><w:r><w:t xml:space="preserve"> </w:t></w:r></w:p></w:footnote>'
        )
        next(note.iter(qn("w:t"))).text = f" {text}"
        self._element.append(note)
        return footnote_id


def _footnote_reference(footnote_id: int):
    run = OxmlElement("w:r")
    properties = OxmlElement("w:rPr")
    raised = OxmlElement("w:vertAlign")
    raised.set(qn("w:val"), "superscript")
    properties.append(raised)
    reference = OxmlElement("w:footnoteReference")
    reference.set(qn("w:id"), str(footnote_id))
    run.extend([properties, reference])
    return run


class _DocxWriter:
    """Appends markdown blocks to a new document, in order.

    python-docx's own add_paragraph()/add_table() scan the body for its
    section properties on every call and look styles up by name through
    every style, which makes big documents quadratic. So blocks are built
    as elements and inserted directly before the section properties, and
    style ids are looked up once. List numbering and rules have no
    python-docx API either, so they are written as XML too.
    """

    def __init__(self):
        self._document = docx.Document()
        self._section_properties = self._document.element.body.sectPr
        self._style_ids: dict[str, str] = {}
        numbering = self._document.part.numbering_part.element
        self._numbering = numbering
        self._num_id_next = max(num.numId for num in numbering.num_lst) + 1
        self._abstract_num_ids: dict[str, int] = {}

        self._paragraph: Paragraph | None = None  # where inline tokens go
        self._lists: list[_List] = []
        # One entry per open list item: has it had its first paragraph yet?
        self._items_started: list[bool] = []
        self._task_item = False
        self._quote_depth = 0
        self._table_rows: list[list[_Cell]] | None = None
        self._cell: _Cell | None = None
        self._footnotes = _Footnotes(self._document)
        # The citations of the inline block being written, by child (artifactflow.citations).
        self._markers: dict[int, dict[int, list[Marker]]] = {}
        self._references = {}
        self._block = 0

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        self._document.save(buffer)
        return buffer.getvalue()

    def properties_set(self, *, title: str, author: str) -> None:
        properties = self._document.core_properties
        now = timezone.now()
        # python-docx refuses a property longer than 255 characters; an artifact's title may have 300.
        properties.title = title[:_PROPERTY_MAX_CHARS]
        properties.author = author[:_PROPERTY_MAX_CHARS]
        properties.last_modified_by = author[:_PROPERTY_MAX_CHARS]
        properties.created = now
        properties.modified = now
        properties.revision = 1
        properties.comments = ""

    def title_add(self, title: str) -> None:
        self._paragraph_append(style="Title").add_run(title)

    def subtitle_add(self, subtitle: str) -> None:
        self._paragraph_append(style="Subtitle").add_run(subtitle)

    def tokens_add(self, tokens: list[Token]) -> None:
        citations = citations_read(tokens)
        self._references = citations.references
        for marker in citations.markers:
            self._markers.setdefault(marker.block, {}).setdefault(marker.child, []).append(marker)
        # The list of sources, written a line each, keeps a line each.
        for block in citations.reference_blocks:
            for child in tokens[block].children:
                if child.type == "softbreak":
                    child.type = "hardbreak"
        for self._block, token in enumerate(tokens):
            handler = self._HANDLERS.get(token.type)
            if handler is not None:
                handler(self, token)
            elif token.type == "inline":
                self._inline(token)
            elif token.content and not token.type.endswith(("_open", "_close")):
                # A block this walker does not know: keep its words.
                self._text_block(token)

    # Blocks.

    def _heading_open(self, token: Token) -> None:
        self._paragraph = self._paragraph_append(style=f"Heading {token.tag[1]}")

    def _paragraph_open(self, token: Token) -> None:
        self._task_item = bool(self._items_started) and not self._items_started[-1]
        self._paragraph = self._paragraph_in_context()

    def _block_close(self, token: Token) -> None:
        self._paragraph = None

    def _inline(self, token: Token) -> None:
        if self._cell is not None:
            self._cell.inline = token
            self._cell.markers = self._markers.get(self._block)
            return
        children = token.children or []
        if self._task_item:
            self._task_item = False
            children = _task_marker_replace(children)
        paragraph = self._paragraph or self._paragraph_in_context()
        _inline_add(paragraph, children, markers=self._markers.get(self._block), footnote=self._footnote)

    def _footnote(self, marker: Marker, number: int) -> int:
        """A footnote for one source of a citation: what it quotes, the source's name and address."""
        reference = self._references[number]
        quoted = f"“{marker.quote}” — " if marker.quote else ""
        named = f"{reference.title}, {reference.href}" if reference.title != reference.href else reference.href
        return self._footnotes.add(_XML_INVALID.sub("", quoted + named))

    def _text_block(self, token: Token) -> None:
        # Raw HTML and unknown blocks: the literal text, line breaks kept.
        self._paragraph_in_context().add_run(token.content.rstrip("\n"))

    def _code_block(self, token: Token) -> None:
        paragraph = self._paragraph_append()
        # A run's text turns "\n" into Word line breaks: one paragraph per block.
        _monospace(paragraph.add_run(token.content.rstrip("\n")))

    def _hr(self, token: Token) -> None:
        border = OxmlElement("w:pBdr")
        bottom = OxmlElement("w:bottom")
        for name, value in (("val", "single"), ("sz", "6"), ("space", "1"), ("color", "auto")):
            bottom.set(qn(f"w:{name}"), value)
        border.append(bottom)
        self._paragraph_append()._p.get_or_add_pPr().append(border)

    def _blockquote_open(self, token: Token) -> None:
        self._quote_depth += 1

    def _blockquote_close(self, token: Token) -> None:
        self._quote_depth -= 1

    # Lists.

    def _list_open(self, token: Token) -> None:
        ordered = token.type == "ordered_list_open"
        num_id = None
        if ordered:
            style = self._list_style("List Number", depth=len(self._lists) + 1)
            num_id = self._numbering_restart(style=style, start=int(token.attrGet("start") or 1))
        self._lists.append(_List(ordered=ordered, num_id=num_id))

    def _list_close(self, token: Token) -> None:
        self._lists.pop()

    def _list_item_open(self, token: Token) -> None:
        self._items_started.append(False)

    def _list_item_close(self, token: Token) -> None:
        self._items_started.pop()

    def _paragraph_in_context(self) -> Paragraph:
        """A new paragraph styled for where it stands: list item, quote or body."""
        if self._items_started:
            depth = len(self._lists)
            if self._items_started[-1]:
                return self._paragraph_append(style=self._list_style("List Continue", depth=depth))
            self._items_started[-1] = True
            current = self._lists[-1]
            base = "List Number" if current.ordered else "List Bullet"
            paragraph = self._paragraph_append(style=self._list_style(base, depth=depth))
            if current.num_id is not None:
                paragraph._p.get_or_add_pPr().get_or_add_numPr().get_or_add_numId().val = current.num_id
            return paragraph
        if self._quote_depth:
            paragraph = self._paragraph_append(style="Quote")
            paragraph.paragraph_format.left_indent = _QUOTE_INDENT * self._quote_depth
            return paragraph
        return self._paragraph_append()

    @staticmethod
    def _list_style(base: str, *, depth: int) -> str:
        depth = min(depth, _LIST_DEPTH_MAX)
        return base if depth == 1 else f"{base} {depth}"

    def _numbering_restart(self, *, style: str, start: int) -> int:
        """A new Word list instance for `style`, counting from `start`.

        Paragraphs that only carry a numbered style share one counter across
        the whole document, so a second list would carry on from the first.
        """
        if style not in self._abstract_num_ids:
            style_num_id = self._document.styles[style].element.pPr.numPr.numId.val
            num = self._numbering.num_having_numId(style_num_id)
            self._abstract_num_ids[style] = num.abstractNumId.val
        num = CT_Num.new(self._num_id_next, self._abstract_num_ids[style])
        num.add_lvlOverride(ilvl=0).add_startOverride(start)
        self._numbering.append(num)
        self._num_id_next += 1
        return num.numId

    # Tables.

    def _table_open(self, token: Token) -> None:
        self._table_rows = []

    def _tr_open(self, token: Token) -> None:
        self._table_rows.append([])

    def _cell_open(self, token: Token) -> None:
        self._cell = _Cell(
            inline=None,
            header=token.type == "th_open",
            alignment=_ALIGNMENTS.get(token.attrGet("style") or ""),
        )
        self._table_rows[-1].append(self._cell)

    def _cell_close(self, token: Token) -> None:
        self._cell = None

    def _table_close(self, token: Token) -> None:
        rows, self._table_rows = self._table_rows, None
        columns = max(len(row) for row in rows)
        section = self._document.sections[-1]
        width = section.page_width - section.left_margin - section.right_margin
        tbl = CT_Tbl.new_tbl(len(rows), columns, width)
        tbl.tblStyle_val = self._style_id("Table Grid")
        self._section_properties.addprevious(tbl)
        table = Table(tbl, self._document)
        for tr, row in zip(tbl.tr_lst, rows, strict=True):
            for tc, cell in zip(tr.tc_lst, row, strict=False):  # a short row leaves its last cells empty
                paragraph = Paragraph(tc.p_lst[0], table)
                if cell.alignment is not None:
                    paragraph.alignment = cell.alignment
                if cell.inline is not None:
                    _inline_add(
                        paragraph,
                        cell.inline.children or [],
                        bold=cell.header,
                        markers=cell.markers,
                        footnote=self._footnote,
                    )

    # Low level.

    def _paragraph_append(self, *, style: str | None = None) -> Paragraph:
        p = OxmlElement("w:p")
        if style is not None:
            p.style = self._style_id(style)
        self._section_properties.addprevious(p)
        return Paragraph(p, self._document)

    def _style_id(self, name: str) -> str:
        if name not in self._style_ids:
            self._style_ids[name] = self._document.styles[name].style_id
        return self._style_ids[name]

    _HANDLERS = {
        "heading_open": _heading_open,
        "heading_close": _block_close,
        "paragraph_open": _paragraph_open,
        "paragraph_close": _block_close,
        "fence": _code_block,
        "code_block": _code_block,
        "html_block": _text_block,
        "hr": _hr,
        "blockquote_open": _blockquote_open,
        "blockquote_close": _blockquote_close,
        "bullet_list_open": _list_open,
        "ordered_list_open": _list_open,
        "bullet_list_close": _list_close,
        "ordered_list_close": _list_close,
        "list_item_open": _list_item_open,
        "list_item_close": _list_item_close,
        "table_open": _table_open,
        "table_close": _table_close,
        "tr_open": _tr_open,
        "th_open": _cell_open,
        "td_open": _cell_open,
        "th_close": _cell_close,
        "td_close": _cell_close,
    }


def _task_marker_replace(children: list[Token]) -> list[Token]:
    """GitHub task list items ("[ ] todo", "[x] done") start with a box instead."""
    if not children or children[0].type != "text":
        return children
    match = _TASK_MARKER.match(children[0].content)
    if match is None:
        return children
    box = "☐ " if match[1] == " " else "☑ "
    first = children[0].copy(content=box + children[0].content[match.end() :])
    return [first, *children[1:]]


def _inline_add(
    paragraph: Paragraph,
    children: list[Token],
    *,
    bold: bool = False,
    markers: dict[int, list[Marker]] | None = None,
    footnote=None,
) -> None:
    """Runs for one block's inline tokens, formatting nested as markdown nests
    it; each citation among them (`markers`, by child) a footnote's reference,
    made by `footnote(marker, number)`."""
    # How many open spans currently ask for each format.
    formats = {"bold": int(bold), "italic": 0, "strike": 0}
    links: list[tuple[str, list[str]]] = []  # href and the text shown for it so far

    def run_add(text: str, *, code: bool = False) -> None:
        if not text:
            return
        run = paragraph.add_run(text)
        # Set only what is on: every property written adds XML to the run.
        if formats["bold"]:
            run.bold = True
        if formats["italic"]:
            run.italic = True
        if formats["strike"]:
            run.font.strike = True
        if code:
            _monospace(run)
        if links:
            links[-1][1].append(text)

    def cited_add(text: str, cited: list[Marker]) -> None:
        at = 0
        for marker in cited:
            run_add(text[at : marker.start])
            for number in marker.numbers:
                paragraph._p.append(_footnote_reference(footnote(marker, number)))
            at = marker.end
        run_add(text[at:])

    for position, token in enumerate(children):
        kind = token.type
        if kind in _FORMAT_CHANGES:
            name, change = _FORMAT_CHANGES[kind]
            formats[name] += change
        elif kind == "text" and markers and position in markers:
            cited_add(token.content, markers[position])
        elif kind in ("text", "html_inline"):
            run_add(token.content)
        elif kind == "code_inline":
            run_add(token.content, code=True)
        elif kind == "softbreak":
            run_add(" ")
        elif kind == "hardbreak":
            run_add("\n")
        elif kind == "link_open":
            links.append((str(token.attrGet("href") or ""), []))
        elif kind == "link_close" and links:
            href, shown = links.pop()
            text = "".join(shown)
            if href and href not in (text, "mailto:" + text):
                run_add(f" ({href})")
        elif kind == "image":
            # Images are not fetched: their description and address stand in.
            alt = "".join(child.content for child in token.children or [])
            run_add(f"{alt} ({token.attrGet('src')})".strip())
        elif token.content:
            run_add(token.content)


def _monospace(run) -> None:
    run.font.name = MONOSPACE_FONT
