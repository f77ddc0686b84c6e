"""HTML and markdown to sectioned plain text.

Markdown is rendered to HTML by markdown-it-py and then read by the same walker as uploaded
HTML, so raw HTML inside markdown gets exactly the same hidden-text rules.

Hidden text matters here beyond tidiness: text a browser would not show (display:none, the
`hidden` attribute, zero font size...) is a known carrier of prompt injections aimed at the
voice agent, so it is dropped rather than indexed.
"""

from __future__ import annotations

import itertools
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import trafilatura
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from selectolax.lexbor import LexborHTMLParser, LexborNode

from app.ingestion.extract_model import Extracted, Section
from app.ingestion.extract_plain import (
    ANSWER_LABEL_RE,
    QUESTION_LABEL_RE,
    decode_text,
    normalise_newlines,
    part_faq_lines,
    strip_invisible,
    tidy_lines,
)
from app.ingestion.extract_table import table_statements

# Never content; inputs go whatever their type (type="hidden" ones carry injected text too).
# `form` is handled separately: see _walk_content.
_DROPPED = frozenset(
    {
        "script", "style", "noscript", "template", "svg", "math", "iframe", "frame", "frameset",
        "object", "embed", "applet", "canvas", "audio", "video", "map", "nav", "footer", "aside",
        "button", "input", "select", "option", "optgroup", "datalist", "textarea", "output",
        "head", "title", "meta", "link", "base",
    }
)  # fmt: skip
_PARAGRAPH_BLOCKS = frozenset(
    {
        "p", "section", "article", "main", "header", "blockquote", "pre", "table", "figure",
        "hr", "address", "details", "fieldset", "form", "hgroup", "center",
    }
)  # fmt: skip
_LINE_BLOCKS = frozenset(
    {
        "div", "ul", "ol", "dl", "li", "tr", "dt", "dd", "figcaption", "summary", "legend",
        "caption", "thead", "tbody", "tfoot", "body", "html", "search", "menu", "dir",
    }
)  # fmt: skip
_CELLS = frozenset({"td", "th"})
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
# Utility classes that mean display:none in the CSS frameworks most pages use. Stylesheets are
# not evaluated, so these are the only class-based hiding we can see.
_HIDDEN_CLASSES = frozenset(
    {"hidden", "d-none", "hide", "invisible", "sr-only", "visually-hidden", "visuallyhidden",
     "screen-reader-text"}
)  # fmt: skip
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_ZERO = re.compile(r"[+-]?(?:0+\.?0*|\.0+)(?:[a-z]+|%)?")
_WHITESPACE = re.compile(r"\s+")

# What trafilatura must not see: _DROPPED but the <head>, where it looks for the page's
# language, and <noscript>, which holds the whole article on script-rendered blogs.
_NEVER_CONTENT = _DROPPED - {"head", "title", "meta", "link", "base", "noscript"}
_INLINE_PRE = ", ".join(
    f"{parent} pre" for parent in ("p", "li", "td", "th", "pre", "h1", "h2", "h3", "h4", "h5", "h6")
)
# Browsers look for <meta charset> in the first 1024 bytes; real pages put it later too.
_CHARSET_WINDOW = 16384
_META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_SHORT_MAIN_TEXT = 250
_TAIL_BLOCK = 100  # characters
_SENTENCE_END = re.compile(r"[.!?…][\"'”’»)\]]*$")
_WHOLE_PAGE_BELOW = 500  # characters of visible text
_TRAFILATURA: dict[str, Any] = {
    "output_format": "html",
    "include_comments": False,
    "include_tables": True,
    "include_images": False,
    "include_links": False,
    "deduplicate": False,
    "fast": True,
    "with_metadata": False,
}

# A paragraph of short lines is a block of items (an address, a price list, contact
# details), not a wrapped sentence: each line ends where it ends. Wrapped prose has lines
# longer than this (editors wrap at 72 to 100 characters).
_ITEM_LINE_MAX_CHARS = 50
# Longer lines are items too when each ends where a line of facts ends (a digit, a closing
# mark, an email address or a web address) or the next opens with a label ("Office: 01632
# 960214", "Out of hours (moving day only): 07700 900418"), and the next never goes on in lower
# case: "...LH4 2QP\nOffice: 01632 960214 · Text: 07700 900318\nOffice hrs Mon-Fri 9-5".
_LABEL_RE = re.compile(r"[A-Z][\w'’ /&.-]{0,24}(?:\([^()\n]{1,40}\))?:\s")
_LINE_DONE = ".!?:;)"
_ENDS_WITH_ADDRESS_RE = re.compile(r"(?:\S@\S+\.[A-Za-z]{2,}|https?://\S+|www\.\S+\.[A-Za-z]{2,}/?)$")
# A bold paragraph this short, not a sentence, is a heading ("**Opening hours**").
_LABEL_HEADING_MAX_WORDS = 6
_LEADER_HINT_RE = re.compile(r"\.{4}|…{2}|(?:\. ){3}")


def _faq_and_items(state: StateCore) -> None:
    """Markdown as people write it without markdown in mind: an FAQ's question in bold or
    after "Q:" on its own line is a heading (as a ``###`` question is), so its answer is read
    under it and the question is never said as its own answer; and the line breaks of a
    paragraph of items are kept (see _ITEM_LINE_MAX_CHARS)."""
    tokens: list[Token] = []
    strip_answer_label = False
    # An FAQ question is a heading a level below the section's, or beside the question
    # heading before it ("### Do I need to book?" then "Q: Do you deliver?").
    level = "h6"
    for index, token in enumerate(state.tokens):
        if token.type == "inline" and index and state.tokens[index - 1].type == "heading_open":
            level = state.tokens[index - 1].tag if token.content.rstrip().endswith("?") else "h6"
        if token.type != "inline" or not token.children or index == 0:
            tokens.append(token)
            continue
        children = [c for c in token.children if not (c.type == "text" and not c.content)]
        if strip_answer_label and children and children[0].type == "text":
            children[0].content = ANSWER_LABEL_RE.sub("", children[0].content)
        strip_answer_label = False
        question, rest = (
            _question_line(children) if state.tokens[index - 1].type == "paragraph_open" else (None, [])
        )
        if question is not None:
            # paragraph_open becomes the question's heading; what follows it on the next
            # lines, its answer's paragraph.
            tokens[-1] = Token("heading_open", level, 1, block=True)
            tokens.append(
                Token("inline", "", 0, children=[Token("text", "", 0, content=question)], content=question)
            )
            tokens.append(Token("heading_close", level, -1, block=True))
            if rest:
                if rest[0].type == "text":
                    rest[0].content = ANSWER_LABEL_RE.sub("", rest[0].content)
                _keep_item_lines(rest)
                tokens.append(Token("paragraph_open", "p", 1, block=True))
                tokens.append(Token("inline", "", 0, children=rest))
            else:
                strip_answer_label = True
                tokens.append(Token("paragraph_open", "p", 1, block=True, hidden=True))
                tokens.append(Token("inline", "", 0, children=[]))
            continue
        _keep_item_lines(children)
        token.children = children
        tokens.append(token)
    state.tokens = tokens


def _question_line(children: list[Token]) -> tuple[str | None, list[Token]]:
    """The FAQ question a paragraph opens with, on a line of its own (all in bold, or after
    "Q:"), and the paragraph's other lines; (None, []) when it opens with none."""
    end = next((i for i, c in enumerate(children) if c.type in ("softbreak", "hardbreak")), len(children))
    first, rest = children[:end], children[end + 1 :]
    text = "".join(c.content for c in first if c.type in ("text", "code_inline")).strip()
    bold = (
        len(first) >= 3
        and first[0].type in ("strong_open", "em_open")
        and first[-1].type in ("strong_close", "em_close")
    )
    if not text.endswith("?"):
        # A short bold label alone on its line heads what follows ("**Opening hours**").
        label = text.rstrip(":").strip()
        if not bold or not label or len(label.split()) > _LABEL_HEADING_MAX_WORDS or label[-1] in ".!;,":
            return None, []
        text = label
    labelled = QUESTION_LABEL_RE.match(text)
    if not (bold or labelled) or any(
        c.type not in ("text", "code_inline", "strong_open", "strong_close", "em_open", "em_close")
        for c in first
    ):
        return None, []
    return (text[labelled.end() :] if labelled else text), rest


def _line_ends_an_item(line: str, after: str) -> bool:
    line, after = line.rstrip(), after.strip()
    if not line or not after or after[0].islower():
        return False
    return (
        line[-1].isdigit()
        or line[-1] in _LINE_DONE
        or _ENDS_WITH_ADDRESS_RE.search(line) is not None
        or _LABEL_RE.match(after) is not None
    )


def _keep_item_lines(children: list[Token]) -> None:
    lines = [""]
    for child in children:
        if child.type == "softbreak":
            lines.append("")
        elif child.type in ("text", "code_inline"):
            lines[-1] += child.content
    if len(lines) < 2:
        return
    if (
        all(len(line.strip()) <= _ITEM_LINE_MAX_CHARS for line in lines)
        or any(_LEADER_HINT_RE.search(line) for line in lines)
        or all(_line_ends_an_item(line, after) for line, after in itertools.pairwise(lines))
    ):
        for child in children:
            if child.type == "softbreak":
                child.type, child.tag = "hardbreak", "br"


_MARKDOWN = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
_MARKDOWN.core.ruler.push("faq_and_items", _faq_and_items)
_FRONT_MATTER_FENCE = "---"


def extract_html(data: bytes, charset: str | None = None) -> Extracted:
    """Main text of an HTML page, one section per heading; `charset` is the HTTP header's, if any.

    The bytes are decoded by what they are (see decode_text), hidden elements are removed and
    trafilatura picks the main content, leaving out navigation, footers, related links and
    comments. A short page, or one where trafilatura finds nothing, is read whole: its visible
    text in <main> or <article> if there is one, else in <body>.

    Raises ExtractionError when the text is unreadable in every encoding.
    """
    text = decode_text(data, (charset, *_declared_charsets(data)))
    tree = LexborHTMLParser(text)
    whole = _walk_content(_body(tree), keep_image_alt=False)
    document = None
    if sum(len(section.text) for section in whole.sections) >= _WHOLE_PAGE_BELOW:
        # Below that, a page (or a fragment sent as HTML) has too little text to hold much
        # boilerplate, and trafilatura, made for whole web pages, drops short paragraphs.
        document = _main_content(text)
    if document is None:
        roots = _content_roots(tree)
        document = _walk_content(roots, keep_image_alt=False) if roots else whole
        if not document.sections:
            # An empty <main> (say, filled by JavaScript) should not hide the rest of the page.
            document = whole
    title = _html_title(tree) or document.first_h1
    return Extracted(title=title, sections=document.sections, pages_total=None, pages_skipped=0)


def _declared_charsets(data: bytes) -> list[str]:
    """The charsets <meta> elements declare, in document order (browsers read the first)."""
    return [match.decode("ascii") for match in _META_CHARSET.findall(data[:_CHARSET_WINDOW])]


def _main_content(text: str) -> _Document | None:
    """trafilatura's main text as sections; None when it finds none."""
    page = trafilatura.load_html(text)
    if page is None:
        return None
    # Reverse document order: an element goes before its ancestors, so none is dropped twice.
    for element in reversed(list(page.iter())):
        tag = element.tag
        if isinstance(tag, str) and (tag in _NEVER_CONTENT or _hidden(tag, element.attrib)):
            element.drop_tree()  # keeps the text that follows the element
    main = trafilatura.extract(page, **_TRAFILATURA, favor_precision=True)
    if not main or len(LexborHTMLParser(main).text()) < _SHORT_MAIN_TEXT:
        # Precision sometimes keeps only a fragment (a lead, a caption): ask for more.
        fuller = trafilatura.extract(page, **_TRAFILATURA)
        if fuller and (not main or len(fuller) > len(main)):
            main = fuller
    if not main:
        return None
    content = LexborHTMLParser(main)
    _drop_tail(content)
    # trafilatura renders inline <code> as <pre>: inside running text it stays inline.
    for node in reversed(content.css(_INLINE_PRE)):
        node.unwrap()
    document = _walk_content(_body(content), keep_image_alt=False)
    return document if document.sections else None


def _drop_tail(content: LexborHTMLParser) -> None:
    """Drop short blocks after the last sentence: what trafilatura lets through at the end of an
    article is bylines, copyright lines, "sign up" and "related" rows, none of them a sentence."""
    for block in reversed(content.css("body > *")):
        text = _WHITESPACE.sub(" ", block.text(deep=True)).strip()
        if len(text) >= _TAIL_BLOCK or _SENTENCE_END.search(text):
            return
        block.decompose()


def extract_markdown(data: bytes, charset: str | None = None) -> Extracted:
    """Markdown as speakable text: markup, URLs and images dropped, alt text and code kept."""
    source = part_faq_lines(_strip_front_matter(normalise_newlines(decode_text(data, (charset,)))))
    tree = LexborHTMLParser(_MARKDOWN.render(source))
    document = _walk_content(_body(tree), keep_image_alt=True)
    sections = document.sections
    headings = [heading for heading in document.headings if heading.strip()]
    if not sections and headings:
        # Only headings ("# Opening hours" and nothing under it): they are the text. It was
        # refused as holding "no letters or digits".
        sections = [Section(text="\n\n".join(headings), heading=None, page=None)]
    return Extracted(title=document.first_h1, sections=sections, pages_total=None, pages_skipped=0)


def _strip_front_matter(source: str) -> str:
    # YAML front matter (Jekyll, Hugo, Docusaurus) would otherwise render as a rule and a
    # setext heading full of metadata.
    lines = source.split("\n")
    if not lines or lines[0].strip() != _FRONT_MATTER_FENCE:
        return source
    for index in range(1, len(lines)):
        if lines[index].strip() in (_FRONT_MATTER_FENCE, "..."):
            return "\n".join(lines[index + 1 :])
    return source


def _body(tree: LexborHTMLParser) -> list[LexborNode]:
    root = tree.body or tree.root
    return [root] if root is not None else []


def _content_roots(tree: LexborHTMLParser) -> list[LexborNode]:
    """The visible <main>, else the outermost visible <article>s; empty when there are neither."""
    for main in tree.css("main"):
        if not _hidden_or_dropped_with_ancestors(main):
            return [main]
    # Selected, not walked up to: an ancestor walk per node is quadratic in a page nesting
    # thousands of them.
    nested = {node.mem_id for node in tree.css("article article")}
    outermost = (node for node in tree.css("article") if node.mem_id not in nested)
    return [node for node in outermost if not _hidden_or_dropped_with_ancestors(node)]


def _html_title(tree: LexborHTMLParser) -> str | None:
    drawn = {node.mem_id for node in tree.css("svg title, math title")}
    for node in tree.css("title"):
        if node.mem_id in drawn:
            continue
        title = _WHITESPACE.sub(" ", strip_invisible(node.text(deep=True))).strip()
        if title:
            return title
    return None


def _has_ancestor(node: LexborNode, tag: str) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.tag == tag:
            return True
        parent = parent.parent
    return False


def _hidden_or_dropped_with_ancestors(node: LexborNode) -> bool:
    current: LexborNode | None = node
    while current is not None and current.is_element_node:
        if current.tag in _DROPPED or _is_hidden(current):
            return True
        current = current.parent
    return False


# A cell longer than this is page layout, not data: such a table is read as before.
_MAX_DATA_CELL_CHARS = 300
_MAX_DATA_TABLE_CELLS = 20_000
_MAX_DATA_COLUMNS = 100
_SPAN = re.compile(r"\d{1,3}")


def _data_table(table: LexborNode) -> list[str] | None:
    """The rows of a table of data as statements ("Service: Cut; Price: 35 dollars."), the
    way Word, Excel and CSV tables are said (extract_table.row_statement), or None to read the
    table as text.

    Only a table whose first row is its header (all ``<th>``, or in ``<thead>``: every
    Markdown table) with two columns or more: without a header, "Monday, 9 AM, 5 PM" reads
    better than names made up. Cells spanning rows are repeated in each row they cover, so a
    plan's name stays with each of its prices; an empty cell keeps its column. Layout tables
    (long cells, a table inside), and tables holding anything a browser hides or this module
    drops, are read as text by the walk, which knows what to leave out."""
    rows: list[list[LexborNode]] = []
    cells = 0
    nodes = table.traverse(include_text=False)
    next(nodes)  # the table itself
    for node in nodes:
        tag = node.tag or ""
        if tag == "table" or tag in _DROPPED or _is_hidden(node) or tag in _HEADINGS:
            return None
        if tag == "tr":
            rows.append([c for c in _children(node) if c.tag in _CELLS])
            cells += len(rows[-1])
            if cells > _MAX_DATA_TABLE_CELLS or len(rows[-1]) > _MAX_DATA_COLUMNS:
                return None
    if len(rows) < 2 or not rows[0] or max(len(r) for r in rows) < 2:
        return None
    first = rows[0]
    if not (
        all(c.tag == "th" for c in first) or (first[0].parent is not None and first[0].parent.tag == "thead")
    ):
        return None
    # A header of empty cells ("| | |", as converters write a table without one) names no
    # column: every row after it is data.
    named = any(c.text(separator=" ").strip() for c in first)
    grid: list[list[str]] = []
    spans: dict[int, tuple[int, str]] = {}  # column -> (rows still covered, text)
    for row in rows:
        said: list[str] = []
        column = 0
        queue = deque(row)
        while queue or any(col >= column for col in spans):
            if column in spans:
                left, text = spans[column]
                said.append(text)
                spans[column] = (left - 1, text)
                if left - 1 == 0:
                    del spans[column]
                column += 1
                continue
            if not queue:
                break
            cell = queue.popleft()
            text = _WHITESPACE.sub(" ", strip_invisible(cell.text(separator=" "))).strip()
            if len(text) > _MAX_DATA_CELL_CHARS:
                return None
            width = min(
                int(m[0]) if (m := _SPAN.fullmatch((cell.attributes.get("colspan") or "1").strip())) else 1,
                50,
            )
            height = min(
                int(m[0]) if (m := _SPAN.fullmatch((cell.attributes.get("rowspan") or "1").strip())) else 1,
                500,
            )
            for offset in range(max(width, 1)):
                said.append(text if offset == 0 else "")
                if height > 1:
                    spans[column] = (height - 1, text if offset == 0 else "")
                column += 1
            if column > _MAX_DATA_COLUMNS:
                return None  # spans wider than any table of data
        grid.append(said)
    return list(table_statements(grid if named else grid[1:], header=named))


def _children(node: LexborNode) -> list[LexborNode]:
    found = []
    child = node.first_child
    while child is not None:
        found.append(child)
        child = child.next
    return found


def _is_hidden(node: LexborNode) -> bool:
    """Whether a browser would hide this element, judged from its own attributes."""
    return _hidden(node.tag or "", node.attributes)


def _hidden(tag: str, attributes: Mapping[str, str | None]) -> bool:
    if tag == "dialog" and "open" not in attributes:
        return True
    if not attributes:
        return False
    if "hidden" in attributes:
        return True
    if (attributes.get("aria-hidden") or "").strip().lower() == "true":
        return True
    classes = (attributes.get("class") or "").lower().split()
    if _HIDDEN_CLASSES.intersection(classes):
        return True
    style = attributes.get("style")
    return bool(style) and _style_hides(style or "")


def _style_hides(style: str) -> bool:
    for declaration in _CSS_COMMENT.sub("", style).split(";"):
        name, colon, raw_value = declaration.partition(":")
        if not colon:
            continue
        name = name.strip().lower()
        value = raw_value.lower().replace("!important", "").strip()
        if name == "display" and value == "none":
            return True
        if name == "visibility" and value in ("hidden", "collapse"):
            return True
        if name in ("font-size", "opacity") and _ZERO.fullmatch(value):
            return True
    return False


@dataclass(slots=True)
class _Document:
    sections: list[Section] = field(default_factory=list)
    first_h1: str | None = None
    headings: list[str] = field(default_factory=list)  # every heading's text, in order


def _walk_content(roots: list[LexborNode], *, keep_image_alt: bool) -> _Document:
    document = _walk(roots, keep_image_alt=keep_image_alt, drop_forms=True)
    if not document.sections:
        # ASP.NET WebForms and similar wrap the whole page in one <form>; dropping forms
        # would leave nothing, so read such a page with its form.
        document = _walk(roots, keep_image_alt=keep_image_alt, drop_forms=False)
    return document


class _Writer:
    """Collects inline text, line and paragraph breaks and headings into sections."""

    def __init__(self) -> None:
        self._lines: list[tuple[int, str]] = []  # (newlines before it: 1 or 2, text)
        self._line: list[str] = []
        self._break_before = 0
        self._pending_space = False
        self._pending_cell = False
        self._pending_item = False
        self._heading_stack: list[tuple[int, str]] = []
        # The heading path of each section; the first section is the text before any heading.
        self._paths: list[list[tuple[int, str]]] = [[]]
        self._bodies: list[list[tuple[int, str]]] = []

    def text(self, raw: str) -> None:
        collapsed = _WHITESPACE.sub(" ", raw)
        stripped = collapsed.strip()
        if not stripped:
            if collapsed and self._line:
                self._pending_space = True
            return
        if self._line:
            if self._pending_cell:
                self._line.append(", ")
            elif self._pending_space or collapsed[0] == " ":
                self._line.append(" ")
        elif self._pending_item:
            self._line.append("- ")
        self._pending_item = False
        self._line.append(stripped)
        self._pending_space = collapsed[-1] == " "
        self._pending_cell = False

    def preformatted(self, raw: str) -> None:
        # Line structure survives; indentation does not (tidy_lines collapses it later), which
        # costs nothing in speech or search.
        for index, piece in enumerate(normalise_newlines(raw).split("\n")):
            if index:
                self.line_break(1)
            if piece.strip():
                self._line.append(piece)

    def item(self) -> None:
        """A list item starts: its first line is marked as one ("- "), as in markdown, so the
        answerer reads the item as a sentence of its own and a list after "if you are:" as
        that line's list, even when an item starts in lower case."""
        self.line_break(1)
        self._pending_item = True

    def cell(self) -> None:
        if self._line:
            self._pending_cell = True

    def line_break(self, strength: int) -> None:
        if self._line:
            self._lines.append((self._break_before or 1, "".join(self._line)))
            self._line = []
            self._break_before = strength
        else:
            self._break_before = max(self._break_before, strength)
        self._pending_space = self._pending_cell = False

    def heading(self, level: int, text: str) -> None:
        self.line_break(2)
        self._finish_section()
        while self._heading_stack and self._heading_stack[-1][0] >= level:
            self._heading_stack.pop()
        self._heading_stack.append((level, text))
        self._paths.append(list(self._heading_stack))

    def _finish_section(self) -> None:
        self._bodies.append(self._lines)
        self._lines = []
        self._break_before = 0

    def finish(self) -> _Document:
        self.line_break(2)
        self._finish_section()
        h1_texts = [path[-1][1] for path in self._paths[1:] if path[-1][0] == 1]
        first_h1 = h1_texts[0] if h1_texts else None
        # A lone H1 names the whole document (it becomes the title), so repeating it in
        # every heading path adds nothing.
        omit_h1 = len(h1_texts) == 1
        sections: list[Section] = []
        for path, lines in zip(self._paths, self._bodies, strict=True):
            body = tidy_lines(
                "".join(("\n" * brk if i else "") + text for i, (brk, text) in enumerate(lines))
            )
            if not body:
                continue
            heading = " > ".join(text for level, text in path if not (omit_h1 and level == 1)) or None
            if heading is None and sections and sections[-1].heading is None:
                # Text before and under the omitted H1 both belong to the document itself.
                body = f"{sections.pop().text}\n\n{body}"
            sections.append(Section(text=body, heading=heading, page=None))
        return _Document(
            sections=sections, first_h1=first_h1, headings=[path[-1][1] for path in self._paths[1:]]
        )


_EXIT = object()


def _walk(roots: list[LexborNode], *, keep_image_alt: bool, drop_forms: bool) -> _Document:
    """Depth-first walk with an explicit stack: hostile pages nest deeper than Python recursion allows."""
    writer = _Writer()
    heading_parts: list[str] | None = None  # collecting a heading's text while not None
    heading_level = 0
    heading_node: LexborNode | None = None
    pre_depth = 0
    # Each entry also says whether the node is inside an <article> or <main>.
    stack: list[tuple[object, LexborNode, bool]] = [
        (None, root, _has_ancestor(root, "article") or _has_ancestor(root, "main"))
        for root in reversed(roots)
    ]
    while stack:
        marker, node, framed = stack.pop()
        tag = node.tag or ""
        if marker is _EXIT:
            if node is heading_node and heading_parts is not None:
                text = _WHITESPACE.sub(" ", "".join(heading_parts)).strip()
                heading_parts, heading_node = None, None
                if text:
                    writer.heading(heading_level, text)
            elif heading_parts is not None:
                pass  # blocks inside a heading only added spaces on the way in
            elif tag == "pre":
                pre_depth -= 1
                writer.line_break(2)
            elif tag in _PARAGRAPH_BLOCKS:
                writer.line_break(2)
            elif tag in _LINE_BLOCKS:
                writer.line_break(1)
            continue
        if node.is_text_node:
            content = strip_invisible(node.text_content or "")
            if heading_parts is not None:
                heading_parts.append(content)
            elif pre_depth:
                writer.preformatted(content)
            else:
                writer.text(content)
            continue
        if not node.is_element_node:
            continue  # comments, doctype
        if tag in _DROPPED or (drop_forms and tag == "form") or _is_hidden(node):
            continue
        if tag == "header" and not framed:
            # The site's banner goes; an article's own header (its H1, byline) stays.
            continue
        if tag == "br":
            if heading_parts is not None:
                heading_parts.append(" ")
            else:
                writer.line_break(1)
            continue
        if tag == "img":
            alt = (node.attributes.get("alt") or "") if keep_image_alt else ""
            if heading_parts is not None:
                heading_parts.append(alt)
            elif alt:
                writer.text(alt)
            continue
        if heading_parts is not None:
            # Everything inside a heading is heading text, nested headings included.
            if tag in _PARAGRAPH_BLOCKS or tag in _LINE_BLOCKS or tag in _CELLS or tag in _HEADINGS:
                heading_parts.append(" ")
        elif tag in _HEADINGS:
            heading_parts, heading_level, heading_node = [], _HEADINGS[tag], node
        elif tag == "table" and not pre_depth and (statements := _data_table(node)) is not None:
            # A table of data with a header row: each row one sentence naming its columns.
            writer.line_break(2)
            for statement in statements:
                writer.text(statement)
                writer.line_break(2)
            continue
        elif tag == "pre":
            pre_depth += 1
            writer.line_break(2)
        elif tag in _PARAGRAPH_BLOCKS:
            writer.line_break(2)
        elif tag == "li":
            writer.item()
        elif tag in _LINE_BLOCKS:
            writer.line_break(1)
        elif tag in _CELLS:
            writer.cell()
        stack.append((_EXIT, node, framed))
        framed = framed or tag in ("article", "main")
        stack.extend((None, c, framed) for c in reversed(_children(node)))
    return writer.finish()
