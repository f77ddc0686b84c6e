"""Turn uploaded bytes into text sections for chunking.

`sniff_kind` (app.ingestion.sniff) decides what an upload is, `extract` reads it in-process,
and `extract_isolated` is what the service should call: it reads PDFs and Office files in a
separate, resource-limited process, because a hostile PDF can make a parser spin or allocate
without bound, and a hostile Office file (a zip of XML) can try the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from app.ingestion.extract_markup import extract_html, extract_markdown
from app.ingestion.extract_model import (
    DEFAULT_MAX_PAGES,
    ISOLATED_KINDS,
    LARGE_MARKUP_BYTES,
    MARKUP_NOUNS,
    NO_TEXT,
    OFFICE_NOUNS,
    PDF_PAGE_TOO_SLOW,
    ChildReasons,
    Extracted,
    ExtractionError,
    PageRead,
    PdfOutline,
    Section,
    SourceKind,
    UnsupportedType,
    assemble_pdf,
)
from app.ingestion.extract_plain import extract_plain_text
from app.ingestion.extract_table import extract_csv
from app.ingestion.sniff import SUPPORTED, content_kind, sniff_kind

__all__ = [
    "EXTRACTION_VERSION",
    "Extracted",
    "ExtractionError",
    "Section",
    "SourceKind",
    "UnsupportedType",
    "content_kind",
    "extract",
    "extract_isolated",
    "kind_of_bytes",
    "parsed_in_child",
    "sniff_kind",
]

logger = logging.getLogger(__name__)

# Raise it with any change to extraction or chunking that changes what a stored document
# becomes (sections found, text kept, vectors stored with it): workers re-read every document
# an older version read, from its stored copy, once (app/ingestion/pipeline.py). 1: headings
# of plain text and Word. 2: each sentence's vector read in its chunk (the offline default;
# the chunks' own vectors come from embedding_cache, so a re-read costs one model pass). 3:
# the days and months a chunk's hours cover, searched in words callers use ("Mon-Fri" covers
# Wednesday and weekdays, "Apr–Oct" August: ChunkRow.days); FAQs in bold or "Q:", leader dots, lines of items
# and day cells of tables read as such. 4: the holidays of "Xmas" and "BH" searched in words.
# 5: list items of HTML and markdown keep a "- " mark (embedded without it, so their
# vectors stay; plain text's own "- " lines are embedded without theirs: a model pass).
# 6: markdown lines of facts longer than an address's stay lines, a short bold line is a
# heading, and a shortened day or month ends a sentence ("Closed Sat. Phone us."): a model
# pass for the chunks and sentences that change. 7: contact lines ending in an email or
# web address, or before a bracketed label, stay lines; "max." and "incl." may end a sentence.
EXTRACTION_VERSION = 7

# The package root, from which `python -m app.ingestion.extract_worker` resolves.
_IMPORT_ROOT = Path(__file__).resolve().parents[2]
_WORKER_MODULE = "app.ingestion.extract_worker"
_STDERR_TAIL = 2000
_READ_BYTES = 1 << 16  # of the PDF worker's lines at a time
_SECTION_FIELDS = 3  # [heading, page, text]
_PAGE_FIELDS = 4  # [index, text or null, out_of_memory, unmapped]
_KINDS: dict[str, SourceKind] = {
    "text": "text",
    "markdown": "markdown",
    "html": "html",
    "pdf": "pdf",
    "docx": "docx",
    "pptx": "pptx",
    "xlsx": "xlsx",
    "csv": "csv",
}


def kind_of_bytes(kind: str, data: bytes) -> SourceKind:
    """The kind to read `data` as, given the kind stored or fetched with it: its bytes decide.

    Raises ExtractionError, with the reason, for a known binary format and for unknown kinds;
    other binary data fails when it is decoded, as unreadable.
    """
    if kind not in _KINDS:
        raise ExtractionError(f"unsupported file type '{kind}'; {SUPPORTED}")
    try:
        return content_kind(_KINDS[kind], data, refuse_control_bytes=False)
    except UnsupportedType as exc:
        raise ExtractionError(str(exc)) from exc


def extract(
    kind: SourceKind, data: bytes, *, max_pages: int = DEFAULT_MAX_PAGES, charset: str | None = None
) -> Extracted:
    """Extract in this process and thread. For uploads, prefer extract_isolated.

    `charset` is the one an HTTP header declared; the bytes overrule it when they disagree.
    Raises ExtractionError with a user-facing reason; "no text found" when nothing is left.
    """
    if kind == "text":
        result = extract_plain_text(data, charset)
    elif kind == "markdown":
        result = extract_markdown(data, charset)
    elif kind == "html":
        result = extract_html(data, charset)
    elif kind == "pdf":
        from app.ingestion.extract_pdf import extract_pdf  # noqa: PLC0415 - pypdf only when needed

        result = extract_pdf(data, max_pages=max_pages)
    elif kind in OFFICE_NOUNS:
        from app.ingestion.extract_office import extract_office  # noqa: PLC0415 - as pypdf

        result = extract_office(kind, data)
    elif kind == "csv":
        result = extract_csv(data, charset)
    else:
        raise UnsupportedType(f"unsupported file type '{kind}'; {SUPPORTED}")
    if not result.sections:
        raise ExtractionError(NO_TEXT)
    return result


async def extract_isolated(
    kind: SourceKind,
    data: bytes,
    *,
    timeout_s: float = 60.0,
    page_timeout_s: float = 10.0,
    memory_mb: int = 1024,
    max_pages: int = DEFAULT_MAX_PAGES,
    charset: str | None = None,
) -> Extracted:
    """Extract without risking the service: PDFs, Office files and large markup (HTML,
    Markdown, CSV of LARGE_MARKUP_BYTES or more) run in a child process with hard limits.

    The child gets `memory_mb` of address space and a CPU-time limit, and is killed once
    `timeout_s` of wall-clock time has passed; it is always reaped, also when this coroutine
    is cancelled. A PDF page that takes longer than `page_timeout_s` is skipped. Plain text
    and smaller markup are parsed in a thread: their worst case is a few seconds, less than
    starting the child. The bytes decide the kind: a PDF or a Word
    file is read as one, in the child, whatever it was called.
    """
    kind = kind_of_bytes(kind, data)
    if not parsed_in_child(kind, data):
        return await asyncio.to_thread(extract, kind, data, max_pages=max_pages, charset=charset)
    reasons = ChildReasons.of(kind)
    run = _WorkerRun(
        kind,
        data,
        reasons=reasons,
        timeout_s=timeout_s,
        page_timeout_s=page_timeout_s,
        memory_mb=memory_mb,
        max_pages=max_pages,
        charset=charset,
    )
    if kind == "pdf":
        return await _extract_pdf(run)
    returncode, stdout, stderr = await run.start(first_page=0)
    return _read_answer(returncode, stdout, stderr, reasons=reasons, timeout_s=timeout_s)


def parsed_in_child(kind: SourceKind, data: bytes) -> bool:
    """Whether extract_isolated reads these bytes (of a kind kind_of_bytes gave) in the child."""
    return kind in ISOLATED_KINDS or (kind in MARKUP_NOUNS and len(data) >= LARGE_MARKUP_BYTES)


# A PDF whose pages keep ending the worker is given up after this many processes.
_MAX_PDF_RUNS = 8


async def _extract_pdf(run: _WorkerRun) -> Extracted:
    """Read a PDF in as many worker processes as it takes, page by page.

    A page that ends its process (pdfium's allocator aborts when it runs out of memory; a
    native parser may crash) costs only itself: the next process starts after it. A page
    reached after others gets one more go in a fresh process first, as does a page that ran
    out of memory there, since what ran out may be memory held for the pages before it. A
    page that takes longer than a page may is skipped; the pages read when the file's time
    runs out are kept, and the rest counted as skipped.
    """
    outline: PdfOutline | None = None
    pages: dict[int, PageRead] = {}
    first = 0
    out_of_time = False
    for _ in range(_MAX_PDF_RUNS):
        ran = await run.start_pdf(first_page=first)
        slow = "file" if ran.returncode == -signal.SIGXCPU else ran.slow  # the CPU limit backs the clock
        report = _PdfReport.parse(ran.stdout, first_page=first, max_pages=run.max_pages, known=outline)
        if report is None:
            if slow is None:
                # Nothing readable came back: the worker did not get as far as opening the file.
                return _read_answer(
                    ran.returncode, ran.stdout, ran.stderr, reasons=run.reasons, timeout_s=run.timeout_s
                )
            if outline is None:  # the file's time ran out before it was open
                raise ExtractionError(run.reasons.too_slow.format(seconds=run.timeout_s))
            report = _PdfReport(outline, [])
        outline = outline or report.outline
        pages.update((page.index, page) for page in report.pages)
        last = min(outline.pages_total, run.max_pages)
        if report.done:
            break
        if report.retry is not None:
            first = report.retry
            continue
        stopped_at = report.pages[-1].index + 1 if report.pages else first
        if slow == "file":
            out_of_time = True
            pages.update((index, PageRead(index, None, too_slow=True)) for index in range(stopped_at, last))
            break
        if slow == "page":
            logger.warning("PDF page %d took over %g s and was skipped", stopped_at + 1, run.page_timeout_s)
            pages[stopped_at] = PageRead(stopped_at, None, too_slow=True)
        else:
            _log_stop(ran.returncode, ran.stderr, stopped_at)
            if stopped_at > first:
                first = stopped_at
                continue
            pages[stopped_at] = PageRead(
                index=stopped_at,
                text=None,
                # Killed by the kernel's out-of-memory killer (our own kill is the timeout).
                out_of_memory=ran.returncode == -signal.SIGKILL,
                crashed=ran.returncode != -signal.SIGKILL,
            )
        first = stopped_at + 1
        if first >= last:
            break
    else:
        if outline is None:
            raise ExtractionError(run.reasons.crashed)
        for index in range(last):
            pages.setdefault(index, PageRead(index=index, text=None, crashed=True))
    assert outline is not None
    too_slow = (
        run.reasons.too_slow.format(seconds=run.timeout_s)
        if out_of_time
        else PDF_PAGE_TOO_SLOW.format(seconds=run.page_timeout_s)
    )
    ordered = [pages[index] for index in sorted(pages)]
    return assemble_pdf(outline, ordered, max_pages=run.max_pages, too_slow=too_slow)


def _log_stop(returncode: int | None, stderr: bytes, page_index: int) -> None:
    tail = stderr[-_STDERR_TAIL:].decode("utf-8", errors="replace")
    logger.warning("PDF worker ended with status %s on page %d: %s", returncode, page_index + 1, tail)


@dataclass(frozen=True, slots=True)
class _PdfReport:
    """What one PDF worker process wrote (extract_worker's docstring), checked line by line:
    it came from a process that read hostile input."""

    outline: PdfOutline
    pages: list[PageRead]
    done: bool = False
    retry: int | None = None

    @classmethod
    def parse(
        cls, stdout: bytes, *, first_page: int, max_pages: int, known: PdfOutline | None
    ) -> _PdfReport | None:
        """None when the process wrote nothing usable before it ended; ExtractionError when it
        reported why the file cannot be read. Every process must see the document as the first
        one did (`known`)."""
        outline: PdfOutline | None = None
        pages: list[PageRead] = []
        for line in stdout.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                logger.warning("PDF worker wrote an unreadable line: %r", line[:200])
                return None
            if not isinstance(record, dict) or len(record) != 1:
                return None
            if outline is None:
                if record.get("ok") is False and isinstance(record.get("reason"), str):
                    raise ExtractionError(record["reason"])  # the file could not be opened
                outline = _outline(record.get("outline"))
                if outline is None or known not in (None, outline):
                    return None
                continue
            expected = pages[-1].index + 1 if pages else first_page
            if "page" in record:
                page = _page(record["page"], expected)
                if page is None:
                    return None
                pages.append(page)
            elif record.get("done") is True and expected == min(outline.pages_total, max_pages):
                return cls(outline, pages, done=True)
            elif isinstance(record.get("retry"), int) and record["retry"] == expected > first_page:
                return cls(outline, pages, retry=expected)
            elif record.get("ok") is False and isinstance(record.get("reason"), str):
                raise ExtractionError(record["reason"])
            else:
                return None
        return None if outline is None else cls(outline, pages)


def _outline(value: object) -> PdfOutline | None:
    if not isinstance(value, dict):
        return None
    title, total, repaired = value.get("title"), value.get("pages_total"), value.get("repaired")
    if not (
        (title is None or isinstance(title, str))
        and isinstance(total, int)
        and total >= 0
        and isinstance(repaired, bool)
    ):
        return None
    return PdfOutline(title=title, pages_total=total, repaired=repaired)


def _page(value: object, expected_index: int) -> PageRead | None:
    if not (isinstance(value, list) and len(value) == _PAGE_FIELDS):
        return None
    index, text, out_of_memory, unmapped = value
    if not (
        index == expected_index
        and (text is None or isinstance(text, str))
        and isinstance(out_of_memory, bool)
        and isinstance(unmapped, bool)
    ):
        return None
    return PageRead(index=index, text=text, out_of_memory=out_of_memory, unmapped=unmapped)


class _WorkerRun:
    """How to start the worker for one file; each process gets the time that is left."""

    def __init__(
        self,
        kind: SourceKind,
        data: bytes,
        reasons: ChildReasons,
        *,
        timeout_s: float,
        memory_mb: int,
        max_pages: int,
        charset: str | None = None,
        page_timeout_s: float = math.inf,
    ) -> None:
        self.kind = kind
        self.data = data
        self.reasons = reasons
        self.timeout_s = timeout_s
        self.page_timeout_s = page_timeout_s
        self.memory_mb = memory_mb
        self.max_pages = max_pages
        # An HTTP header's label: passed on only if it can be one (no NUL, no control bytes).
        self.charset = charset if charset and charset.isascii() and charset.isprintable() else ""
        self.deadline = time.monotonic() + timeout_s

    async def start(self, *, first_page: int) -> tuple[int | None, bytes, bytes]:
        """The process's exit status, stdout and stderr; over the time, the too-slow error."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise ExtractionError(self.reasons.too_slow.format(seconds=self.timeout_s))
        process = await self._spawn(first_page, remaining)
        timed_out = False
        stdout = stderr = b""
        try:
            async with asyncio.timeout(remaining):
                stdout, stderr = await process.communicate(self.data)
        except TimeoutError:
            timed_out = True
        finally:
            await _reap(process)
        if timed_out:
            raise ExtractionError(self.reasons.too_slow.format(seconds=self.timeout_s))
        return process.returncode, stdout, stderr

    async def start_pdf(self, *, first_page: int) -> _PdfRun:
        """Run the PDF worker, reading its lines as they come: once the file is open, a page
        that takes longer than `page_timeout_s` ends the process, as does the file's time."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            return _PdfRun(None, b"", b"", slow="file")
        process = await self._spawn(first_page, remaining)
        stdin, stdout_pipe, stderr_pipe = process.stdin, process.stdout, process.stderr
        assert stdin is not None
        assert stdout_pipe is not None
        assert stderr_pipe is not None
        feeding = asyncio.create_task(_feed(stdin, self.data))
        errors = asyncio.create_task(stderr_pipe.read())
        stdout = bytearray()
        slow: Literal["page", "file"] | None = None
        page_started: float | None = None  # pages are timed once the outline is in
        try:
            while True:
                now = time.monotonic()
                page_left = math.inf if page_started is None else page_started + self.page_timeout_s - now
                wait = min(self.deadline - now, page_left)
                try:
                    async with asyncio.timeout(max(wait, 0)):
                        chunk = await stdout_pipe.read(_READ_BYTES)
                except TimeoutError:
                    slow = "file" if time.monotonic() >= self.deadline else "page"
                    break
                if not chunk:
                    break
                stdout += chunk
                if b"\n" in chunk:
                    page_started = time.monotonic()
        except BaseException:
            feeding.cancel()
            errors.cancel()
            await _reap(process)
            raise
        feeding.cancel()  # a worker that ended early did not read it all
        if slow is None:  # its output ended: it is exiting, and its status tells how
            try:
                async with asyncio.timeout(max(self.deadline - time.monotonic(), 0)):
                    await process.wait()
            except TimeoutError:
                slow = "file"
        await _reap(process)
        return _PdfRun(process.returncode, bytes(stdout), await errors, slow)

    async def _spawn(self, first_page: int, remaining: float) -> asyncio.subprocess.Process:
        cpu_seconds = math.ceil(remaining) + 1
        return await asyncio.create_subprocess_exec(
            *_worker_command(
                self.kind, self.memory_mb, cpu_seconds, self.max_pages, first_page, self.charset
            ),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=_IMPORT_ROOT,
            # Its own session: a Ctrl-C meant for the service must not reach the child mid-write,
            # the service decides when the child ends.
            start_new_session=True,
        )


@dataclass(frozen=True, slots=True)
class _PdfRun:
    """One PDF worker process's outcome; `slow` says which time ran out, if one did."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    slow: Literal["page", "file"] | None = None


async def _feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    """Write the file to the worker; a worker that has already ended reads no more of it."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(data)
        await stdin.drain()
        stdin.close()


async def _reap(process: asyncio.subprocess.Process) -> None:
    """Kill the process if it still runs, and wait for it, even if this task is cancelled again."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    await asyncio.shield(process.wait())


def _worker_command(
    kind: SourceKind, memory_mb: int, cpu_seconds: int, max_pages: int, first_page: int, charset: str
) -> list[str]:
    return [
        sys.executable,
        "-m",
        _WORKER_MODULE,
        kind,
        str(memory_mb),
        str(cpu_seconds),
        str(max_pages),
        str(os.getpid()),
        str(first_page),
        charset,
    ]


def _read_answer(
    returncode: int | None, stdout: bytes, stderr: bytes, *, reasons: ChildReasons, timeout_s: float
) -> Extracted:
    if returncode == -signal.SIGXCPU:
        # The CPU-time limit is a backstop just above the wall-clock one.
        raise ExtractionError(reasons.too_slow.format(seconds=timeout_s))
    if returncode != 0:
        tail = stderr[-_STDERR_TAIL:].decode("utf-8", errors="replace")
        logger.warning("extraction worker ended with status %s: %s", returncode, tail)
        if returncode == -signal.SIGKILL:
            # Not killed by us (that is the timeout path): the kernel's out-of-memory killer.
            raise ExtractionError(reasons.too_big)
        raise ExtractionError(reasons.crashed)
    try:
        return _decode_answer(json.loads(stdout))
    except (ValueError, TypeError, KeyError) as exc:
        logger.warning("extraction worker wrote an unreadable answer: %r", stdout[:200])
        raise ExtractionError(reasons.crashed) from exc


def _decode_answer(payload: object) -> Extracted:
    """Validate the worker's JSON field by field; it came from a process that read hostile input."""
    if not isinstance(payload, dict):
        raise TypeError("answer is not an object")
    if payload.get("ok") is not True:
        reason = payload.get("reason")
        if not isinstance(reason, str):
            raise TypeError("failure without a reason")
        raise ExtractionError(reason)
    title = payload["title"]
    pages_total = payload["pages_total"]
    pages_skipped = payload["pages_skipped"]
    raw_sections = payload["sections"]
    if not (
        (title is None or isinstance(title, str))
        and (pages_total is None or isinstance(pages_total, int))
        and isinstance(pages_skipped, int)
        and isinstance(raw_sections, list)
    ):
        raise TypeError("malformed answer")
    sections: list[Section] = []
    for item in raw_sections:
        if not (isinstance(item, list) and len(item) == _SECTION_FIELDS):
            raise TypeError("malformed section")
        heading, page, text = item
        if not (
            (heading is None or isinstance(heading, str))
            and (page is None or isinstance(page, int))
            and isinstance(text, str)
            and text
        ):
            raise TypeError("malformed section")
        sections.append(Section(text=text, heading=heading, page=page))
    if not sections:
        raise ExtractionError(NO_TEXT)
    return Extracted(title=title, sections=sections, pages_total=pages_total, pages_skipped=pages_skipped)
