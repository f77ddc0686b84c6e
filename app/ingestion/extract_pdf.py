"""PDF text extraction: pypdf first, pypdfium2 (Chrome's PDF engine) where pypdf gives up.

Runs inside the isolated worker process in production (see extract_worker), so this module
imports only what that process needs; pypdfium2 is imported on first use.

Images are never decoded: pypdf is configured without a JBIG2 decoder and pdfium's text API
does not touch image streams.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import threading
import zlib
from collections.abc import Iterator
from typing import Any, Protocol

import pypdf
from pypdf import PasswordType
from pypdf.errors import LimitReachedError
from pypdf.generic import ArrayObject, DictionaryObject, NullObject, StreamObject

from app.ingestion.extract_model import (
    DEFAULT_MAX_PAGES,
    PDF_DAMAGED,
    PDF_ENCRYPTED,
    Extracted,
    ExtractionError,
    PageRead,
    PdfOutline,
    assemble_pdf,
)
from app.ingestion.extract_plain import normalise_newlines, strip_invisible, tidy_lines

logger = logging.getLogger(__name__)

# PDFium is not thread-safe and in-process callers may use threads (asyncio.to_thread).
_PDFIUM_LOCK = threading.Lock()

_LIGATURES = str.maketrans({"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"})
# pypdf writes the glyph name ("/g123") when a font maps glyphs to no Unicode; such names are
# never words, and in practice stand between real words.
_GLYPH_NAMES = re.compile(r"/(?:g|G|gid|glyph|cid|index)\d+")
# The replacement character (a glyph the reader could not map) and the private use area (a
# symbol font's own code points) stand for no character anyone can read.
_UNREADABLE_CHARACTERS = re.compile("[\ufffd\ue000-\uf8ff]")
# pdfium marks a line-end hyphen it has already joined across the line break with U+0002.
_PDFIUM_HYPHEN = re.compile(r"(?<=\w)\x02[ \t]*\n?[ \t]*(?=\w)")
_SOFT_HYPHEN_BREAK = re.compile(r"\xad[ \t]*\n[ \t]*")
_HYPHEN_BREAK = re.compile(r"(\w)-[ \t]*\n[ \t]*(\w)")
_DOCUMENT_FILENAME = re.compile(
    r"\.(?:pdf|docx?|odt|rtf|txt|pptx?|odp|xlsx?|ods|indd|qxd|tex|dvi|ps|eps|html?|md|pages|key)$"
)
_FLATE = frozenset({"/FlateDecode", "/Fl"})
_MAX_TREE_DEPTH = 100  # pypdf's own page_tree_maximum_depth default
_INFLATE_STEP = 1 << 20  # bytes of output per step when checking a stream; the output is discarded
_PLACEHOLDER_TITLES = frozenset({"untitled", "untitled document", "title", "document", "no title", "unknown"})
_MAX_TITLE_CHARS = 300
_IDENTITY_ENCODINGS = frozenset({"/Identity-H", "/Identity-V"})
_MAX_RESOURCE_DICTS = 64  # a page's and its forms' resources looked at for fonts
_NOT_WORD = re.compile(r"[\W_]+")
_LETTERS_TO_JUDGE = 8
_CUT = "\x00"  # where unmapped glyphs were cut out (a NUL of the page's own is no text either)


class _PageSource(Protocol):
    def page_count(self) -> int: ...

    def page_text(self, index: int) -> str: ...

    def why_no_text(self, index: int) -> str | None:
        """For a page that gave no text: what is wrong with it, or None if it is blank."""
        ...


def extract_pdf(data: bytes, *, max_pages: int = DEFAULT_MAX_PAGES) -> Extracted:
    """Text of each page as one section; failing pages are skipped and counted, not fatal.

    At most `max_pages` pages are read (those beyond count as skipped), walking the real page
    list rather than the declared /Count, which a hostile file can set to millions.
    """
    with PdfPages(data) as document:
        pages = [document.read(index) for index in range(min(document.pages_total, max_pages))]
        return assemble_pdf(document.outline, pages, max_pages=max_pages)


class PdfPages:
    """An open PDF, read page by page: each page by the first engine that manages it (pypdf,
    then pdfium), or by pdfium alone when pypdf rejects the file."""

    def __init__(self, data: bytes) -> None:
        self._open = contextlib.ExitStack()
        configuration = pypdf.apply_configuration(jbig2dec_binary=None, disable_legacy_handling=True)
        self._open.enter_context(configuration)
        fallback = _PdfiumSource(data)
        self._open.callback(fallback.close)
        try:
            primary, primary_failure = _open_pypdf(data)
            if primary is not None:
                # pdfium reads no page of a tree it numbers otherwise (_PdfiumSource).
                count = primary.page_count()
                fallback.expected_pages = count if primary.numbered_like_pdfium else -1
                self._engines: list[_PageSource] = [primary, fallback]
                title = primary.title()
                repaired = False
            else:
                self._engines = [fallback]
                title = fallback.title()
                # pdfium repairs files pypdf rejects. Only a reader-specific limitation (AES
                # without the optional `cryptography` package) says the file itself is sound.
                repaired = not isinstance(primary_failure, pypdf.errors.DependencyError)
            total = self._engines[0].page_count()
            self.outline = PdfOutline(title=title, pages_total=total, repaired=repaired)
        except BaseException:
            self.close()
            raise

    @property
    def pages_total(self) -> int:
        return self.outline.pages_total

    def read(self, index: int) -> PageRead:
        return _read_page(self._engines, index)

    def close(self) -> None:
        self._open.close()

    def __enter__(self) -> PdfPages:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _read_page(engines: list[_PageSource], index: int) -> PageRead:
    """The page's text ("" for a blank page), or None when no engine could read it: it ran out
    of memory in an engine, or showed only glyphs mapped to no character, or is damaged.

    An engine that gives no text is asked why: a missing or corrupt content stream is a failed
    page, not a blank one, and the next engine gets a go. pdfium cannot tell a broken page from
    a blank one, so its empty answer never overrules an earlier engine's failure. Nor is its
    text taken when it is the glyph numbers pypdf found unmapped, read out the same way.

    A page that is too big for one engine is given to no other: pdfium's allocator aborts the
    whole process when it runs out of memory, which would cost every page already read.
    """
    failed = False
    unmapped: str | None = None  # the glyph numbers read, once an engine found only those
    for engine in engines:
        try:
            text = engine.page_text(index)
            if text and not (unmapped is not None and _same_glyphs(text, unmapped)):
                return PageRead(index, text)
            problem = engine.why_no_text(index) if not text else "its fonts map no glyph to a character"
        except (MemoryError, LimitReachedError):
            # pypdf's LimitReachedError: a stream inflating past its cap (75 MB), which no page
            # of text needs. One such page should not cost the whole document.
            return PageRead(index, None, out_of_memory=True)
        except _PageLost:
            # Another engine numbers the pages without the lost entry, or with a repaired
            # one: its page at this index would be some other page.
            return PageRead(index, None)
        except _NoReadableText as exc:
            unmapped = exc.unmapped if unmapped is None else unmapped
            problem = "it shows no readable character"
        except Exception as exc:  # parsers raise arbitrary types on hostile pages
            logger.debug("page %d failed in %s", index + 1, type(engine).__name__, exc_info=True)
            problem = type(exc).__name__
        if problem is None and not failed:
            return PageRead(index, "")
        failed = True
        logger.debug("page %d gave no text in %s: %s", index + 1, type(engine).__name__, problem)
    return PageRead(index, None, unmapped=unmapped is not None)


def _same_glyphs(text: str, unmapped: str) -> bool:
    """Whether `text` is only the glyph numbers another engine read unmapped, spaced otherwise."""
    return _NOT_WORD.sub("", text) in unmapped


class _PageLost(Exception):
    """The page tree has an entry here that is no page, so the page's text is lost."""


class _NoReadableText(Exception):
    """The page shows characters, but none of them is readable text."""

    def __init__(self, index: int, unmapped: str = "") -> None:
        super().__init__(index)
        # What fonts without a character map showed (letters and digits only), so that
        # another engine reading the same glyph numbers is not believed either.
        self.unmapped = unmapped


class _PypdfSource:
    def __init__(self, reader: pypdf.PdfReader) -> None:
        self._reader = reader
        self._pages = reader.pages
        self._slots: list[int | None] | None = None
        # False when the page tree has a node pdfium reads otherwise: its page numbers
        # may then differ from pypdf's (known once the pages are counted).
        self.numbered_like_pdfium = True

    def _page_slots(self) -> list[int | None]:
        """Per page of the document, its index in pypdf's page list, or None for a lost page.

        pypdf leaves page-tree entries that are no page (a missing object, a number, an
        unknown dictionary) out of its list without a word, which would shift the number of
        every later page and hide the loss.
        """
        if self._slots is None:
            count = len(self._pages)
            walked = _page_tree_leaves(self._reader)
            if walked is None or sum(walked[0]) != count:  # a tree read unlike pypdf: trust pypdf
                self._slots = list(range(count))
            else:
                leaves, self.numbered_like_pdfium = walked[0], not walked[1]
                kept = iter(range(count))
                self._slots = [next(kept) if leaf else None for leaf in leaves]
        return self._slots

    def _page(self, index: int) -> pypdf.PageObject:
        position = self._page_slots()[index]
        if position is None:
            raise _PageLost(index)
        return self._pages[position]

    def page_count(self) -> int:
        return len(self._page_slots())

    def page_text(self, index: int) -> str:
        page = self._page(index)
        if _uses_unmapped_fonts(page):
            raw, unmapped = _text_less_unmapped(page)
        else:
            raw, unmapped = page.extract_text(), ""
        text = clean_page_text(_GLYPH_NAMES.sub(" ", raw))
        if not text and (raw.strip() or unmapped):
            # Characters came out but none that reads (control codes, glyph names, glyph
            # numbers): fonts that map their glyphs to no Unicode. The page shows text that was
            # lost; it is not blank.
            raise _NoReadableText(index, _NOT_WORD.sub("", unmapped))
        return text

    def why_no_text(self, index: int) -> str | None:
        # pypdf reads what it can of a damaged page and says so only in log lines (a missing
        # object, a stream it could inflate only in part), returning "" as for a blank page.
        contents = self._page(index).get("/Contents")
        if contents is None or isinstance(contents, NullObject):  # a null entry is an absent one
            return None
        resolved = contents.get_object()
        for part in list(resolved) if isinstance(resolved, ArrayObject) else [contents]:
            stream = part.get_object()
            if stream is None or isinstance(stream, NullObject):
                return "its content stream is missing"
            if not isinstance(stream, StreamObject):
                return f"its content is {type(stream).__name__}, not a stream"
            stream.get_data()  # raises for filters pypdf cannot decode
            if _inflates_in_part(stream):
                return "its content stream is corrupt"
        return None

    def title(self) -> str | None:
        try:
            metadata = self._reader.metadata
            return sensible_title(metadata.title if metadata is not None else None)
        except Exception:  # noqa: BLE001 - a broken /Info dictionary must not cost the text
            return None


def _page_tree_leaves(reader: pypdf.PdfReader) -> tuple[list[bool], bool] | None:
    """The leaves of the page tree in order, as pypdf walks it: True for a page, False for an
    entry pypdf drops; and whether a node is one that pdfium reads otherwise (a page with
    /Kids, a /Pages node without). None when the tree is not one pypdf would have walked
    either."""
    root = _resolved(reader.root_object.get("/Pages"))
    if not isinstance(root, DictionaryObject):
        return None
    leaves: list[bool] = []
    ambiguous = False
    # The Kids still to walk of each /Pages node on the path down to the current one.
    path: list[tuple[int, Iterator[Any]]] = [(id(root), iter(_kids(root)))]
    while path:
        kid = next(path[-1][1], None)
        if kid is None:
            path.pop()
            continue
        node = kid.get_object()
        if not isinstance(node, DictionaryObject) or not node:
            leaves.append(False)
            continue
        kind = node.get("/Type")
        kind = kind.get_object() if kind is not None else ("/Pages" if "/Kids" in node else "/Page")
        ambiguous = ambiguous or (kind == "/Pages") != ("/Kids" in node)
        if kind != "/Pages":
            leaves.append(kind == "/Page")
            continue
        if len(path) >= _MAX_TREE_DEPTH or any(id(node) == seen for seen, _ in path):
            return None
        path.append((id(node), iter(_kids(node))))
    return leaves, ambiguous


def _maps_no_characters(font: Any) -> bool:
    """A composite font whose codes are glyph numbers (Identity-H/V) with no /ToUnicode map.
    Readers give those numbers as characters: control codes, or letters shifted so that a
    subset font's "Quarterly" reads "4XDUWHUO"."""
    if not isinstance(font, DictionaryObject) or font.get("/Subtype") != "/Type0":
        return False
    return _resolved(font.get("/Encoding")) in _IDENTITY_ENCODINGS and "/ToUnicode" not in font


def _uses_unmapped_fonts(page: pypdf.PageObject) -> bool:
    """Whether the page, or a form it draws, has a font that maps no glyph to a character.

    Looked up first because finding out which text such a font showed costs a visitor, with
    which pypdf also parses pages that show no text at all.
    """
    try:
        return _finds_unmapped_font([page.get("/Resources")])
    except MemoryError:
        raise
    except Exception:  # resources too broken to look into: the page is read as before
        logger.debug("could not look into a page's fonts", exc_info=True)
        return False


def _finds_unmapped_font(pending: list[Any]) -> bool:
    for _ in range(_MAX_RESOURCE_DICTS):
        if not pending:
            return False
        resources = _resolved(pending.pop())
        if not isinstance(resources, DictionaryObject):
            continue
        if any(_maps_no_characters(font) for font in _entries(resources, "/Font")):
            return True
        forms = [x for x in _entries(resources, "/XObject") if x.get("/Subtype") == "/Form"]
        pending += [form.get("/Resources") for form in forms]
    return False


def _text_less_unmapped(page: pypdf.PageObject) -> tuple[str, str]:
    """The page's text without what fonts that map no characters showed, and that part."""
    shown: list[str] = []

    def visit(text: str, _cm: Any, _tm: Any, font: Any, _size: Any) -> None:
        # Only the glyphs: the line breaks pypdf writes into a font's text belong to the layout.
        glyphs = text.strip()
        if glyphs and _maps_no_characters(font):
            shown.append(glyphs)

    raw = page.extract_text(visitor_text=visit)
    if _reads_as_text("".join(shown)):
        return raw, ""
    kept, start = [], 0
    for part in shown:  # in the order they were written out
        at = raw.find(part, start)
        if at >= 0:
            kept.append(raw[start:at])
            start = at + len(part)
    kept.append(raw[start:])
    # A line that held only such glyphs goes with them, rather than leaving a paragraph break.
    lines = _CUT.join(kept).split("\n")
    text = "\n".join(line for line in lines if line.strip(_CUT + " \t") or _CUT not in line)
    return text.replace(_CUT, " "), "".join(shown)


def _reads_as_text(shown: str) -> bool:
    """Whether glyph codes read as characters give text after all: some producers write each
    character's code point as its glyph code. Glyph numbers of Latin text fall below the
    lowercase letters ("Quarterly" reads "4XDUWHUO" in a subset font's standard order), so
    mostly lowercase ASCII letters, enough of them to judge, mean code points."""
    letters = [character for character in shown if character.isascii() and character.isalpha()]
    lowercase = sum(character.islower() for character in letters)
    return len(letters) >= _LETTERS_TO_JUDGE and lowercase * 2 >= len(letters)


def _resolved(value: Any) -> Any:
    return value.get_object() if value is not None else None


def _entries(resources: DictionaryObject, key: str) -> list[DictionaryObject]:
    """The dictionaries named in one category of a resource dictionary (fonts, XObjects)."""
    named = _resolved(resources.get(key))
    values = [_resolved(value) for value in named.values()] if isinstance(named, DictionaryObject) else []
    return [value for value in values if isinstance(value, DictionaryObject)]


def _kids(node: DictionaryObject) -> list[Any]:
    kids = _resolved(node.get("/Kids"))
    return list(kids) if isinstance(kids, ArrayObject) else []


def _open_pypdf(data: bytes) -> tuple[_PypdfSource | None, Exception | None]:
    """Open with pypdf, or say why not. A real password requirement ends extraction here."""
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        # PdfReader has already tried the empty user password; files with only an owner
        # password open with it.
        if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
            raise ExtractionError(PDF_ENCRYPTED)
        # Walks the page tree: cycles and malformed trees surface here.
        source = _PypdfSource(reader)
        source.page_count()
    except (ExtractionError, MemoryError):
        raise
    except Exception as exc:  # pypdf raises many types on broken files; pdfium gets a go
        logger.debug("pypdf could not open the PDF", exc_info=True)
        return None, exc
    return source, None


class _PdfiumSource:
    """pypdfium2, opened on first use.

    As a fallback it reads a page only when it counts the pages as the first engine did
    (`expected_pages`; -1 for a tree the first engine found it would number otherwise): the
    two build the page list from the tree by different rules, and its page at an index may
    then be some other page.
    """

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._document: Any = None  # pypdfium2.PdfDocument; pypdfium2 ships no type hints
        self._opened = False
        self.expected_pages: int | None = None

    def _open(self) -> Any:
        if self._opened:
            return self._document
        self._opened = True
        import pypdfium2  # noqa: PLC0415 - only needed for files pypdf cannot handle

        with _PDFIUM_LOCK:
            try:
                self._document = pypdfium2.PdfDocument(self._data)
            except pypdfium2.PdfiumError as exc:
                if exc.err_code == pypdfium2.raw.FPDF_ERR_PASSWORD:
                    raise ExtractionError(PDF_ENCRYPTED) from exc
                logger.debug("pdfium could not open the PDF: %s", exc)
        return self._document

    def _require(self) -> Any:
        document = self._open()
        if document is None:
            raise ExtractionError(PDF_DAMAGED)
        return document

    def page_count(self) -> int:
        document = self._require()
        with _PDFIUM_LOCK:
            count: int = len(document)
        return count

    def page_text(self, index: int) -> str:
        document = self._require()
        with _PDFIUM_LOCK:
            count = len(document)
        if self.expected_pages not in (None, count):
            raise _PageLost(index)
        with _PDFIUM_LOCK:
            if index >= count:
                raise IndexError(index)
            page = document[index]
            try:
                textpage = page.get_textpage()
                try:
                    raw: str = textpage.get_text_bounded()
                finally:
                    textpage.close()
            finally:
                page.close()
        return clean_page_text(_PDFIUM_HYPHEN.sub("", normalise_newlines(raw)))

    def why_no_text(self, index: int) -> str | None:
        # pdfium's text API reports no damage: an empty page is taken as blank.
        return None

    def title(self) -> str | None:
        document = self._require()
        return self._title(document)

    @staticmethod
    def _title(document: Any) -> str | None:
        with _PDFIUM_LOCK:
            try:
                return sensible_title(document.get_metadata_value("Title"))
            except Exception:  # noqa: BLE001 - metadata is optional
                return None

    def close(self) -> None:
        if self._document is not None:
            with _PDFIUM_LOCK:
                self._document.close()
            self._document = None


def _inflates_in_part(stream: StreamObject) -> bool:
    """Whether a Flate stream's bytes are not one whole zlib stream (corrupt or cut short).

    pypdf then inflates byte by byte and keeps what it got, silently when the data just stops.
    Bytes after the end are fine: early Adobe producers left some there. Called after pypdf
    decoded the stream within its output limit, so this pass is bounded too.
    """
    first = _resolved(stream.get("/Filter"))
    if isinstance(first, ArrayObject):
        first = first[0].get_object() if first else None
    if not (isinstance(first, str) and first in _FLATE):
        return False
    decompressor = zlib.decompressobj()
    pending: bytes = stream._data  # the stored bytes; pypdf has no public reader for them
    try:
        while not decompressor.eof:
            output = decompressor.decompress(pending, _INFLATE_STEP)
            if not output and not pending:
                break  # the input ended before the zlib stream did
            pending = decompressor.unconsumed_tail
    except zlib.error:
        return True
    return not decompressor.eof


def clean_page_text(raw: str) -> str:
    """Whitespace-normalise one page: collapse spaces, keep paragraph breaks, undo line-end hyphenation."""
    text = _UNREADABLE_CHARACTERS.sub("", normalise_newlines(raw).translate(_LIGATURES))
    text = _SOFT_HYPHEN_BREAK.sub("", text).replace("\xad", "")
    text = _HYPHEN_BREAK.sub(_join_hyphenated, text)
    return tidy_lines(strip_invisible(text))


def _join_hyphenated(match: re.Match[str]) -> str:
    before, after = match.group(1), match.group(2)
    # "exam-\nple" is one word; "Jean-\nPaul" and "COVID-\n19" keep their hyphen.
    if before.isalpha() and after.islower():
        return before + after
    return f"{before}-{after}"


def sensible_title(raw: object) -> str | None:
    """A metadata title worth showing, or None for blanks, placeholders and file names."""
    if not isinstance(raw, str):
        return None
    title = " ".join(strip_invisible(normalise_newlines(raw)).split())
    lowered = title.lower()
    if (
        not title
        or len(title) > _MAX_TITLE_CHARS
        or "\ufffd" in title
        or not any(char.isalpha() for char in title)
        or lowered in _PLACEHOLDER_TITLES
        or lowered.startswith("microsoft word - ")
        or _DOCUMENT_FILENAME.search(lowered)
    ):
        return None
    return title
