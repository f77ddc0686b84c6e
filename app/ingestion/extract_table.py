"""Tables as speakable statements, and CSV files as tables.

A voice agent reads a row of a price list well only as a sentence that names its columns:
"Service: whitening. Price: 350 dollars." The first non-empty row of a table is its header;
every later row becomes one such statement, its empty cells left out. Word, PowerPoint and
spreadsheet tables (app.ingestion.extract_office) and CSV files share these rules.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import io
import re
from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal

from app.answering.speech import days_in_full
from app.ingestion.extract_model import Extracted, ExtractionError, Section
from app.ingestion.extract_plain import decode_text, normalise_newlines, strip_invisible

# The most text one table file may give, in characters: a header of long names repeated in
# every row makes the text grow far past the file's size (a 20 MB file could give gigabytes).
MAX_TEXT_CHARS = 20_000_000
TEXT_TOO_LONG = "the {noun} gives more than {limit:,} characters of text; split it into smaller files"
CSV_NOT_TABULAR = "the CSV file is not a table: {why}"
# csv.Sniffer's quote patterns take time quadratic in the sample (64 KiB of one line: 14 s).
_SNIFF_SAMPLE = 8 * 1024
_DELIMITERS = ",;\t|"
# More than one data row in five wider than the header: not a table.
_RAGGED_SHARE = 5
_SENTENCE_END = re.compile(r"[.!?…:;]$")
_SPACE = re.compile(r"\s+")
# Excel keeps 15 significant digits; more are binary noise (0.1 + 0.2 = 0.30000000000000004).
_EXCEL_DIGITS = 15
_CURRENCIES = "$€£¥₹"
_BRACKETED_CURRENCY = re.compile(r"\[\$([^\]-]+)")


def clean_cell(raw: str) -> str:
    """A cell's text on one line: controls and zero-width characters gone, spaces collapsed."""
    return _SPACE.sub(" ", strip_invisible(normalise_newlines(raw))).strip()


# A cell that says it is empty: a dash.
_EMPTY_MARK = re.compile(r"[-–—]+")
# A dot that belongs to the word before it ("10 a.m.", "etc."): kept.
_ABBREVIATION_END = re.compile(r"(?:\b[A-Za-z]\.){2,}$|\b(?:etc|approx|incl|excl|no)\.$", re.IGNORECASE)


def row_statement(header: Sequence[str], cells: Sequence[str]) -> str:
    """One row said as one sentence, "Column: value; Column: value.", for each non-empty cell
    in column order; a cell without a column name is said on its own. Empty when every cell is
    empty.

    One sentence, not one a cell: the answerer reads sentences, and a row cut into "Dish:
    Tomato soup." "Allergens: gluten." let it read one cell with the row above's ("Gluten
    free." for the tomato soup) or leave out the cell asked for (the extension of "Dr Lee").
    """
    parts: list[str] = []
    for index, value in enumerate(cells):
        if not value or _EMPTY_MARK.fullmatch(value):
            continue
        # A header written as a label ("Price:") must not say "Price:: 350".
        name = header[index].rstrip(":").rstrip() if index < len(header) else ""
        # The row's own separator is ";": one inside a cell would read as a new column. A
        # cell of days ("Sun", "Tue–Thu") is written in full: alone, "Sun" could be anything.
        cell = (days_in_full(value) or value).replace(";", ",")
        parts.append(f"{name}: {cell}" if name else cell)
    said = ""
    for part in parts:
        if said:
            # A question in a cell keeps its mark and starts the next part afresh.
            said += " " if said.endswith(("?", "!")) else "; "
        said += part if part.endswith(("?", "!")) or _ABBREVIATION_END.search(part) else part.rstrip(".,; ")
    return said if not said or _SENTENCE_END.search(said) else f"{said}."


def table_statements(
    rows: Iterable[Sequence[str]], *, lone_row: bool = True, header: bool = True
) -> Iterator[str]:
    """The statements of a table given as rows of cleaned cells: the first non-empty row is the
    header (unless not ``header``: then every row is data, its cells said on their own), each
    later non-empty row one statement. A table of one row says its cells when `lone_row` (a
    table in a Word file or on a slide); a sheet or a CSV file of only a header holds no data
    and says nothing."""
    names: Sequence[str] | None = None if header else ()
    said_any = False
    for cells in rows:
        if not any(cells):
            continue
        if names is None:
            names = cells
            continue
        statement = row_statement(names, cells)
        if statement:
            said_any = True
            yield statement
    if lone_row and names and not said_any:
        # A one-row table (a caption row, a row of options) is still text worth keeping.
        yield row_statement((), names)


class TextBudget:
    """Counts the characters extracted so far and stops past MAX_TEXT_CHARS."""

    def __init__(self, noun: str) -> None:
        self.noun, self.limit, self.used = noun, MAX_TEXT_CHARS, 0

    def spend(self, text: str) -> str:
        self.used += len(text)
        if self.used > self.limit:
            raise ExtractionError(TEXT_TOO_LONG.format(noun=self.noun, limit=self.limit))
        return text


def format_value(value: object, number_format: str = "General") -> str:
    """A spreadsheet's cached value as the sheet shows it, readable aloud: numbers without
    exponents or float noise (percentages and currency symbols as the cell's format has them),
    dates as "12 March 2025", TRUE/FALSE as written."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float | Decimal):
        return _format_number(value, number_format)
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0, 0):
            return _format_date(value.date())
        return f"{_format_date(value.date())} {value:%H:%M}"
    if isinstance(value, dt.date):
        return _format_date(value)
    if isinstance(value, dt.time):
        return f"{value:%H:%M}" if not value.second else f"{value:%H:%M:%S}"
    if isinstance(value, dt.timedelta):
        return str(value)
    return clean_cell(str(value))


def _format_date(day: dt.date) -> str:
    return f"{day.day} {day:%B} {day.year}"


def _format_number(value: float | Decimal, number_format: str) -> str:
    fmt = number_format.split(";", 1)[0]
    percent = "%" in fmt
    number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if percent:
        number *= 100
    decimals = _decimals(fmt)
    # Formatting rounds (half to even) at any size, where round() raises past the context's
    # 28 digits (Excel allows 30 decimal places, and values near 1e308).
    text = _plain(number) if decimals is None else f"{number:.{decimals}f}"
    # Excel writes a locale's currency as [$€-407]; elsewhere the symbol stands as it is shown.
    bracketed = _BRACKETED_CURRENCY.search(fmt)
    symbol = bracketed.group(1) if bracketed else next((s for s in _CURRENCIES if s in fmt), "")
    if symbol and fmt.find(symbol) > fmt.find("0"):
        return f"{text} {symbol}" if not percent else f"{text}% {symbol}"
    return f"{symbol}{text}{'%' if percent else ''}"


def _decimals(fmt: str) -> int | None:
    """Decimal places a fixed number format shows ("0.00" → 2, "#,##0" → 0); None for General."""
    bare = re.sub(r'"[^"]*"|\[[^\]]*\]|\\.', "", fmt)
    if "0" not in bare and "#" not in bare:
        return None
    match = re.search(r"[0#]\.([0#]+)", bare)
    return len(match.group(1)) if match else 0


def _plain(number: Decimal) -> str:
    """No exponent, no trailing zeros, at most Excel's 15 significant digits."""
    if not number.is_finite():
        return str(number)
    if number != 0:
        shift = _EXCEL_DIGITS - number.adjusted() - 1
        number = round(number, shift) if shift > 0 else number
    text = f"{number:f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def extract_csv(data: bytes, charset: str | None = None) -> Extracted:
    """A CSV file as one section of row statements.

    The encoding is the bytes' own (see decode_text); the delimiter is sniffed from the start
    of the file, a comma when that is inconclusive. Raises ExtractionError when the file is
    not readable text, or not a table: a field the csv module cannot read, or many rows with
    more fields than the header names (prose split at its commas).
    """
    text = normalise_newlines(decode_text(data, (charset,)))
    if "\x00" in text:
        raise ExtractionError(CSV_NOT_TABULAR.format(why="it holds NUL characters"))
    dialect: type[csv.Dialect] | csv.Dialect = csv.excel
    # One column, or too little text to tell: a comma is the usual delimiter.
    with contextlib.suppress(csv.Error):
        dialect = csv.Sniffer().sniff(text[:_SNIFF_SAMPLE], delimiters=_DELIMITERS)
    shape = _Shape()
    budget = TextBudget("CSV file")
    try:
        rows = shape.watch(csv.reader(io.StringIO(text), dialect))
        statements = [budget.spend(s) for s in table_statements(rows, lone_row=False)]
    except csv.Error as exc:
        raise ExtractionError(CSV_NOT_TABULAR.format(why=exc)) from exc
    if shape.too_wide * _RAGGED_SHARE > shape.rows:
        raise ExtractionError(
            CSV_NOT_TABULAR.format(
                why=f"{shape.too_wide} of {shape.rows} rows have more fields than its header names"
            )
        )
    body = "\n\n".join(statements)
    sections = [Section(text=body, heading=None, page=None)] if body else []
    return Extracted(title=None, sections=sections, pages_total=None, pages_skipped=0)


class _Shape:
    """Counts the data rows that have more non-empty fields than the header."""

    def __init__(self) -> None:
        self.width: int | None = None
        self.rows = 0
        self.too_wide = 0

    def watch(self, reader: Iterable[list[str]]) -> Iterator[list[str]]:
        for raw in reader:
            cells = [clean_cell(cell) for cell in raw]
            width = max((i + 1 for i, cell in enumerate(cells) if cell), default=0)
            if width:
                if self.width is None:
                    self.width = width
                else:
                    self.rows += 1
                    self.too_wide += width > self.width
            yield cells
