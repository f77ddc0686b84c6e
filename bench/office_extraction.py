"""Time Office and CSV extraction as the ingestion worker runs it: Word and Excel files in the
resource-limited child process (extract_isolated), CSV in-process.

The files are generated here with the libraries that read them: a Word file of 100 headings,
1,000 paragraphs and 100 tables; sheets of 10,000 and 99,000 rows; a sheet of 2,000 rows that
each have a formatted cell in column XFD; a sheet of a million empty rows (which fails at the
row limit); a CSV of 100,000 rows.

Run from the repository root::

    uv run --frozen --no-sync python -m bench.office_extraction [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import io
import statistics
import time
import zipfile

import docx
import openpyxl

from app.ingestion.extract import extract, extract_isolated
from app.ingestion.extract_model import ExtractionError, SourceKind


def word_file() -> bytes:
    document = docx.Document()
    for topic in range(100):
        document.add_heading(f"Topic {topic}", level=1)
        for paragraph in range(10):
            document.add_paragraph(
                f"Paragraph {paragraph} of topic {topic}: the clinic offers care at fair prices. " * 3
            )
        table = document.add_table(rows=6, cols=3)
        for row in range(6):
            for column in range(3):
                table.cell(row, column).text = f"cell {row} {column}"
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def sheet_file(rows: int) -> bytes:
    workbook = openpyxl.Workbook(write_only=True)
    sheet = workbook.create_sheet("Prices")
    sheet.append(["Service", "Price", "Since", "Note"])
    for row in range(rows):
        sheet.append([f"service {row}", 100 + row, dt.date(2025, 1, 1), "bring your card"])
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def padded_rows_file(rows: int) -> bytes:
    """Rows of two values and a formatted empty cell in the last column (XFD), as a sheet whose
    whole rows were coloured can be written: openpyxl reads each row 16,384 cells wide."""
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Prices"
    fill = openpyxl.styles.PatternFill("solid", fgColor="FFFF00")
    for row in range(1, rows + 1):
        sheet.append(["Service", "Price"] if row == 1 else [f"service {row}", 100 + row])
        sheet.cell(row=row, column=16_384).fill = fill
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def empty_rows_file() -> bytes:
    rows = "".join(f'<row r="{n}"/>' for n in range(2, 1_000_002))
    sheet = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
        f'<row r="1"><c r="A1" t="inlineStr"><is><t>Name</t></is></c></row>{rows}</sheetData></worksheet>'
    )
    source = sheet_file(1)
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(source)) as archive,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target,
    ):
        for member in archive.infolist():
            content = (
                sheet.encode() if member.filename == "xl/worksheets/sheet1.xml" else archive.read(member)
            )
            target.writestr(member.filename, content)
    return out.getvalue()


async def timed(label: str, kind: SourceKind, data: bytes, repeat: int) -> None:
    seconds: list[float] = []
    outcome = ""
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            if kind == "csv":
                result = extract(kind, data)
            else:
                result = await extract_isolated(kind, data, timeout_s=60)
            outcome = f"{sum(len(section.text) for section in result.sections):,} characters"
        except ExtractionError as exc:
            outcome = f"failed: {exc}"
        seconds.append(time.perf_counter() - start)
    print(
        f"{label}: {len(data) / 1e6:.2f} MB, median {statistics.median(seconds):.2f} s of {repeat}; {outcome}"
    )


async def main(repeat: int) -> None:
    await timed("docx, 100 headings, 1,000 paragraphs, 100 tables", "docx", word_file(), repeat)
    await timed("xlsx, 10,000 rows", "xlsx", sheet_file(10_000), repeat)
    await timed("xlsx, 99,000 rows", "xlsx", sheet_file(99_000), 1)
    await timed("xlsx, 2,000 rows padded to column XFD", "xlsx", padded_rows_file(2_000), repeat)
    await timed("xlsx, 1,000,000 empty rows", "xlsx", empty_rows_file(), 1)
    rows = "".join(f"service {row},{100 + row},bring your card\n" for row in range(100_000))
    await timed("csv, 100,000 rows (in-process)", "csv", f"Service,Price,Note\n{rows}".encode(), repeat)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    asyncio.run(main(parser.parse_args().repeat))
