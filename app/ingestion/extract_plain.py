"""Plain-text decoding and the whitespace and character clean-up shared by all extractors."""

from __future__ import annotations

import codecs
import re
import unicodedata
from collections.abc import Collection, Iterable

from app.ingestion.extract_model import TEXT_UNREADABLE, Extracted, ExtractionError, Section

# UTF-32 first: its little-endian BOM starts with the UTF-16 one.
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)

# C0/C1 controls other than tab and newline never carry meaning in extracted text, and
# zero-width characters can hide words from a reader (e.g. "ig\u200bnore" in an injection).
# ZWJ/ZWNJ stay: several scripts and emoji need them. Lone surrogates (PDF fonts produce them)
# and noncharacters cannot be stored as UTF-8.
_INVISIBLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u2060\ufeff\ud800-\udfff\ufffe\uffff]")
# Valid UTF-8 multibyte sequences (RFC 3629: no overlongs, surrogates or code points past U+10FFFF).
_UTF8_SEQUENCE = re.compile(
    rb"[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}"
    rb"|\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}"
    rb"|\xf4[\x80-\x8f][\x80-\xbf]{2}"
)
# The legacy charsets of the WHATWG Encoding Standard, by Python's names: the labels browsers
# honour. Python knows more (EBCDIC's cp037 and cp500, its own idna and unicode-escape, utf-7,
# the transforms hex and rot13), and text so labelled is mojibake far more often than it is in
# them. UTF-8 is tried before any label, and UTF-16/32 without a BOM are, per the HTML
# standard, mislabelled.
_LEGACY_WEB_CHARSETS = frozenset(
    {
        "ascii", "iso8859-1", "cp866", "iso8859-2", "iso8859-3", "iso8859-4", "iso8859-5",
        "iso8859-6", "iso8859-7", "iso8859-8", "iso8859-9", "iso8859-10", "iso8859-11",
        "iso8859-13", "iso8859-14", "iso8859-15", "iso8859-16", "koi8-r", "koi8-u", "mac-roman",
        "mac-cyrillic", "tis-620", "cp874", "cp1250", "cp1251", "cp1252", "cp1253", "cp1254",
        "cp1255", "cp1256", "cp1257", "cp1258", "gbk", "gb2312", "gb18030", "big5", "big5hkscs",
        "euc_jp", "iso2022_jp", "shift_jis", "cp932", "euc_kr", "cp949",
    }
)  # fmt: skip
_WHATWG_ALIASES = {"latin-1": "cp1252", "iso8859-1": "cp1252", "ascii": "cp1252", "iso8859-9": "cp1254"}
_LATIN_SINGLE_BYTE = frozenset(
    {
        "cp1250", "cp1252", "latin-1", "iso8859-1", "iso8859-2", "iso8859-3", "iso8859-4",
        "iso8859-10", "iso8859-13", "iso8859-14", "iso8859-15", "iso8859-16", "mac-latin2",
        "mac-roman", "mac-iceland", "cp437", "cp850", "cp852", "cp858", "ascii",
    }
)  # fmt: skip
# Polish and Czech letters inside a word (next to an ASCII letter), as iso-8859-2 only
# (ą Ą ś Ś ź Ź ť Ť), as windows-1250 only (the same letters, š Š), or as both (ł Ł ż Ż).
# In windows-1252 these bytes are symbols (± ¶ ¼ ¹ ...) that do not sit inside words.
_CENTRAL_EUROPEAN = tuple(
    re.compile(rb"(?<=[A-Za-z])[%s]|[%s](?=[A-Za-z])" % (chars, chars))
    for chars in (
        rb"\xa1\xb1\xa6\xb6\xac\xbc\xab\xbb",
        rb"\x8a\x8c\x8d\x8f\x9a\x9c\x9d\x9f\xa5",
        rb"\xa3\xb3\xaf\xbf",
    )
)
_CENTRAL_EUROPEAN_MIN = 3
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_UNREADABLE_RATIO = 10  # more than one bad character in ten visible ones
# Unassigned, private use, surrogate.
_NO_CHARACTER = frozenset({"Cn", "Co", "Cs"})
# Bytes a windows code page leaves undefined (0x81 in windows-1252...) become what browsers
# make of them, C1 controls, which strip_invisible then drops.
_C1 = "c1-as-latin-1"


def _c1_as_latin1(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return exc.object[exc.start : exc.end].decode("latin-1"), exc.end


codecs.register_error(_C1, _c1_as_latin1)
_HSPACE = re.compile(r"[^\S\n]+")
_BLANK_LINES = re.compile(r"\n{3,}")
# A leader between an item and its value ("Pass Plus ....... £225", "Chapter 2 · · · · 14"):
# read as a label's colon. Its dots would end a sentence there and run the value into the
# next line's item ("£390 Pass Plus"). Four dots or more before an amount, six before
# anything: "Open.... now called" is an ellipsis and a full stop.
_LEADER_RE = re.compile(
    r"(?<=\S)[^\S\n]*(?:(?:\.[^\S\n]?){4,}|(?:[…·][^\S\n]?){2,})[^\S\n]*(?=[$€£¥₹]?\d)"
    r"|(?<=\S)[^\S\n]*(?:(?:\.[^\S\n]?){6,}|(?:[…·][^\S\n]?){3,})[^\S\n]*(?=\S)"
)


def has_wide_bom(data: bytes) -> bool:
    """Whether the bytes start with a UTF-16 or UTF-32 byte-order mark (such text has NULs)."""
    bom = _bom(data)
    return bom is not None and bom[1] != "utf-8-sig"


def reads_after_bom(data: bytes, *, complete: bool = True) -> str | None:
    """The text, when the bytes start with a byte-order mark and read in its encoding: every
    byte decodes (a character cut off at the end allowed unless `complete`) and few characters
    are unassigned or private. None otherwise: no BOM, or binary data behind one (random bytes
    read as UTF-16 are mostly unassigned or private characters, or unpaired surrogates)."""
    bom = _bom(data)
    if bom is None:
        return None
    try:
        text = codecs.getincrementaldecoder(bom[1])().decode(data, final=complete)
    except UnicodeDecodeError:
        return None
    odd = sum(1 for char in text if unicodedata.category(char) in _NO_CHARACTER)
    return None if _mostly_bad(text, odd) else text


def _bom(data: bytes) -> tuple[bytes, str] | None:
    """The byte-order mark the bytes start with, and its codec."""
    return next(((bom, codec) for bom, codec in _BOMS if data.startswith(bom)), None)


def decode_text(data: bytes, declared: Iterable[str | None] = ()) -> str:
    """Decode text in whatever encoding it really has; `declared` are its charset labels, best first.

    A BOM wins; then UTF-8, also with a few stray bytes (a page pasted together from two
    sources); then the first declared legacy charset that fits the bytes; then a guess from the
    bytes (charset-normalizer, corrected where it is known to be wrong). A declaration of UTF-8
    that the bytes contradict is ignored, as are the labels no codec knows.

    Raises ExtractionError(TEXT_UNREADABLE) when no encoding gives readable text.
    """
    text = _decode(data, declared)
    if _unreadable(text):
        raise ExtractionError(TEXT_UNREADABLE)
    return text


def _decode(data: bytes, declared: Iterable[str | None]) -> str:
    bom = _bom(data)
    if bom is not None:
        text = reads_after_bom(data)
        if text is not None:
            return text
        # A BOM the bytes behind it do not bear out (UTF-8's before Latin-1 text, UTF-16's
        # before binary data): the bytes decide, as if it were not there.
        data = data[len(bom[0]) :]
    # Text in UTF-16 or UTF-32 is a NUL every other byte or more (for Latin letters); a stray
    # NUL in UTF-8 beside a wrong <meta charset="utf-16"> is not.
    if data.count(b"\x00") * 4 >= len(data) > 0 and (text := _declared_wide(data, declared)) is not None:
        return text
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if _mostly_utf8(data):
        return data.decode("utf-8", errors="replace")
    for label in declared:
        codec = _legacy_codec(label)
        if codec is None:
            continue
        try:
            return data.decode(codec)
        except UnicodeDecodeError:
            if codec.startswith("cp125"):
                return data.decode(codec, errors=_C1)
            # Otherwise the declaration does not fit the bytes (GB text labelled Shift_JIS...).
    return _guess(data)


def _mostly_utf8(data: bytes) -> bool:
    """More valid UTF-8 sequences than bytes outside them: UTF-8 with a few stray bytes.

    Text in a legacy encoding forms valid UTF-8 sequences only by chance: Latin or Cyrillic
    text hardly ever, GB text about once per four stray bytes.
    """
    sequences = _UTF8_SEQUENCE.findall(data)
    high = sum(1 for byte in data if byte >= 0x80)
    return bool(sequences) and high - sum(map(len, sequences)) <= len(sequences)


def _declared_wide(data: bytes, declared: Iterable[str | None]) -> str | None:
    """The text, when a label declares UTF-16 or UTF-32 and the bytes, which carry no BOM,
    read as it without a NUL ("H\\0e\\0l\\0" is valid UTF-8, read as such it was unreadable).
    A plain "utf-16" is little-endian, as browsers read it (WHATWG Encoding)."""
    for label in declared:
        try:
            name = codecs.lookup((label or "").strip().strip("\"'").lower()).name
        except (LookupError, ValueError):
            continue
        codec = {"utf-16": "utf-16-le", "utf-32": "utf-32-le"}.get(name, name)
        if codec not in ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"):
            continue
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:
            continue
        if "\x00" not in text:
            return text
    return None


def _legacy_codec(label: str | None) -> str | None:
    """The Python codec for a declared charset label; None for UTF (tried already, or mislabelled)
    and for labels browsers do not honour."""
    if not label:
        return None
    try:
        info = codecs.lookup(label.strip().strip("\"'").lower())
    except (LookupError, ValueError):  # unknown, or not even a name (a NUL in it)
        return None
    name = info.name
    if name not in _LEGACY_WEB_CHARSETS:
        return None
    # Browsers read these labels as windows-1252 (WHATWG Encoding), and so do the servers' authors.
    return _WHATWG_ALIASES.get(name, name)


def _guess(data: bytes) -> str:
    from charset_normalizer import from_bytes  # noqa: PLC0415 - imported only for undeclared legacy text

    best = from_bytes(data).best()
    if best is None:
        raise ExtractionError(TEXT_UNREADABLE)
    codec = codecs.lookup(best.encoding).name
    if codec in _LATIN_SINGLE_BYTE:
        # charset-normalizer confuses the Latin single-byte encodings with each other
        # (iso-8859-1 pages called cp1250, iso-8859-2 called cp1250, cp1252 called latin-1);
        # the letters that differ between them decide better.
        return data.decode(_latin_codec(data), errors=_C1)
    return data.decode(codec, errors="replace")


def _latin_codec(data: bytes) -> str:
    """windows-1252, or iso-8859-2 / windows-1250 when in-word bytes say Polish, Czech and the like."""
    iso, windows, shared = (len(pattern.findall(data)) for pattern in _CENTRAL_EUROPEAN)
    if iso + windows + shared < _CENTRAL_EUROPEAN_MIN:
        return "cp1252"
    return "iso8859-2" if iso > windows else "cp1250"


def _unreadable(text: str) -> bool:
    """Mostly replacement or control characters: what a wrong encoding or binary data leaves."""
    return _mostly_bad(text, text.count("\ufffd") + len(_CONTROL.findall(text)))


def _mostly_bad(text: str, bad: int) -> bool:
    """Whether `bad` characters are more than one in ten of the text's visible ones."""
    visible = len(text) - sum(1 for char in text if char.isspace())
    return visible > 0 and bad * _UNREADABLE_RATIO > visible


def normalise_newlines(text: str) -> str:
    """Turn CRLF and lone CR into LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def strip_invisible(text: str) -> str:
    """Remove control and zero-width characters."""
    return _INVISIBLE.sub("", text)


def tidy_lines(text: str) -> str:
    """Collapse horizontal whitespace, trim lines and keep at most one blank line between paragraphs.

    Expects LF newlines. The result is NFC-normalised so that equal words compare equal in search.
    """
    lines = [_HSPACE.sub(" ", _LEADER_RE.sub(": ", line)).strip() for line in text.split("\n")]
    joined = _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
    return unicodedata.normalize("NFC", joined)


def extract_plain_text(data: bytes, charset: str | None = None) -> Extracted:
    """Plain text in sections under the headings it has (see plain_sections)."""
    text = tidy_lines(strip_invisible(normalise_newlines(decode_text(data, (charset,)))))
    return Extracted(title=None, sections=plain_sections(text), pages_total=None, pages_skipped=0)


def plain_sections(text: str, *, items: Collection[str] = ()) -> list[Section]:
    """Tidied plain text cut at its headings: a short line of its own ("Opening hours", or an
    FAQ's "Do you take walk-ins?") that opens a paragraph or stands alone, followed by body
    text (a sentence, a long line or a list). Read as text, a heading was spoken with the
    answer ("Parking. Parking is free...") and an FAQ's question was heard as its own answer;
    under a heading, the answerer treats it as markdown's. A line that ends a sentence, names
    a label ("Phone: ..."), holds a fact ("Call 555-0132 today"), ends mid-phrase or opens a
    bracket it does not close (a wrapped line), or is followed by a line starting in lower
    case (a wrapped line) or another short line (an address) stays text, as does a line of
    more than six words right above its body that is not a question (more often a wrapped
    sentence's first line); a heading with nothing under it stays text too. A question after
    "Q:" is a heading, and its answer's "A:" goes. ``items`` are
    lines known to be list items (a Word list's numbering is not in its text): never
    headings, and body text under one."""
    paragraphs = part_faq_lines(text).split("\n\n") if text else []
    sections: list[Section] = []
    heading: str | None = None
    body: list[str] = []

    def close() -> None:
        if body:
            sections.append(Section(text="\n\n".join(body), heading=heading, page=None))
        elif heading is not None:
            sections.append(Section(text=heading, heading=None, page=None))

    answer_label = False  # the paragraph may open with "A:", under a "Q:" heading
    for index, written in enumerate(paragraphs):
        paragraph = ANSWER_LABEL_RE.sub("", written, count=1) if answer_label else written
        lines = paragraph.split("\n")
        following = lines[1] if len(lines) > 1 else None
        if following is None and index + 1 < len(paragraphs):
            following = paragraphs[index + 1].split("\n", 1)[0]
        label = QUESTION_LABEL_RE.match(lines[0]) if lines[0].endswith("?") else None
        first = lines[0][label.end() :] if label else lines[0]
        if following is not None and label:
            following = ANSWER_LABEL_RE.sub("", following, count=1)
        answer_label = False
        if (
            following is not None
            and lines[0] not in items
            and _is_heading(first, alone=len(lines) == 1)
            and (_is_body(following) or following in items)
        ):
            close()
            heading, body = first, []
            if len(lines) > 1:
                rest = "\n".join(lines[1:])
                body.append(ANSWER_LABEL_RE.sub("", rest, count=1) if label else rest)
            else:
                answer_label = label is not None
        else:
            body.append(paragraph)
    close()
    return sections


# "Q: Do you deliver?" over "A: Yes, ...": an FAQ written without headings.
QUESTION_LABEL_RE = re.compile(r"^(?:Q|Question)\s?[:.)]\s*(?=\S)", re.IGNORECASE)
ANSWER_LABEL_RE = re.compile(r"^(?:A|Answer)\s?[:.)]\s*(?=\S)", re.IGNORECASE)
# A question line of an FAQ written line after line ("Q: ...?" or, in markdown, all in bold)
# right below another line: it opens a paragraph of its own (part_faq_lines).
_FAQ_LINE_RE = re.compile(
    r"(?<=\S)[^\S\n]*\n(?=[^\S\n]*(?:(?:Q|Question)\s?[:.)]\s*\S[^\n]*\?|\*\*[^*\n]+\?\*\*)[^\S\n]*(?:\n|$))",
    re.IGNORECASE,
)


def part_faq_lines(text: str) -> str:
    """``text`` with a blank line before each FAQ question line that follows another line:
    "Q: ...?", "A: ...", "Q: ...?" written without blank lines is one answer per question."""
    return _FAQ_LINE_RE.sub("\n\n", text)


_HEADING_MAX_WORDS = 10
# Right above its body, a heading is short or a question: a longer line there is more often
# the first line of a wrapped sentence ("... caring for families across\nLeeds and ...").
_HEADING_ABOVE_BODY_MAX_WORDS = 6
_HEADING_MAX_CHARS = 80
_BODY_MIN_WORDS = 8
# A phone number, a price, a time or an address in a short line: a fact to read, not a heading.
_FACT_IN_LINE_RE = re.compile(r"\d{3}|\d[.,:]\d|[$€£¥@]")
# A sentence ending inside the line: two sentences, not a heading (unless a question follows).
_SENTENCE_INSIDE_RE = re.compile(r"[.!?…] ")
# A line of a wrapped paragraph ends mid-phrase ("... to stop at"); a heading does not.
_PHRASE_GOES_ON = frozenset(
    {"a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "at", "for", "with", "by", "from", "as",
     "that", "which", "is", "are", "was", "be", "if", "than", "our", "your", "their", "its"}
)  # fmt: skip
# A list item's marker: a bullet, "1." or "(a)". The answerer reads lists by it too.
LIST_MARKER_RE = re.compile(r"^(?:[-*+•◦‣●○▪–]|\(?\d{1,3}[.)]|\(?[a-z]\))\s+")


def _is_heading(line: str, *, alone: bool) -> bool:
    question = line.endswith("?")
    return (
        0 < len(line) <= _HEADING_MAX_CHARS
        and len(line.split()) <= (_HEADING_MAX_WORDS if alone or question else _HEADING_ABOVE_BODY_MAX_WORDS)
        and (line[0].isupper() or (line[0] in "¿¡" and line[1:2].isupper()))
        and (question or _SENTENCE_INSIDE_RE.search(line) is None)
        and line[-1] not in ".,;:!…"
        and ":" not in line
        and LIST_MARKER_RE.match(line) is None
        and _FACT_IN_LINE_RE.search(line) is None
        and line.count("(") == line.count(")")
        and line.rsplit(" ", 1)[-1].lower() not in _PHRASE_GOES_ON
    )


def _is_body(line: str) -> bool:
    if not line:
        return False
    if LIST_MARKER_RE.match(line):
        return True
    starts = line[:1]
    return (starts.isupper() or starts.isdigit() or starts in "\"'“‘(") and (
        line[-1] in ".!?…:)\"'”’" or len(line.split()) >= _BODY_MIN_WORDS
    )
