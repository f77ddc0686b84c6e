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
from dataclasses import dataclass
from pathlib import Path

from app.ingestion.extract_markup import extract_html, extract_markdown
from app.ingestion.extract_model import (
    DEFAULT_MAX_PAGES,
    ISOLATED_KINDS,
    NO_TEXT,
    OFFICE_CRASHED,
    OFFICE_NOUNS,
    OFFICE_TOO_BIG,
    OFFICE_TOO_SLOW,
    PDF_CRASHED,
    PDF_TOO_BIG,
    PDF_TOO_SLOW,
    Extracted,
    ExtractionError,
    Section,
    SourceKind,
    UnsupportedType,
)
from app.ingestion.extract_plain import extract_plain_text
from app.ingestion.extract_table import extract_csv
from app.ingestion.sniff import SUPPORTED, content_kind, sniff_kind

__all__ = [
    "Extracted",
    "ExtractionError",
    "Section",
    "SourceKind",
    "UnsupportedType",
    "content_kind",
    "extract",
    "extract_isolated",
    "kind_of_bytes",
    "sniff_kind",
]

logger = logging.getLogger(__name__)

# The package root, from which `python -m app.ingestion.extract_worker` resolves.
_IMPORT_ROOT = Path(__file__).resolve().parents[2]
_WORKER_MODULE = "app.ingestion.extract_worker"
_STDERR_TAIL = 2000
_SECTION_FIELDS = 3  # [heading, page, text]
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
    memory_mb: int = 1024,
    max_pages: int = DEFAULT_MAX_PAGES,
) -> Extracted:
    """Extract without risking the service: PDFs and Office files run in a child process with
    hard limits.

    The child gets `memory_mb` of address space and a CPU-time limit, and is killed once
    `timeout_s` of wall-clock time has passed; it is always reaped, also when this coroutine
    is cancelled. Text, markdown, HTML and CSV are parsed in a thread, as they cannot blow up
    the same way. The bytes decide the kind: a PDF or a Word file is read as one, in the child,
    whatever it was called.
    """
    kind = kind_of_bytes(kind, data)
    if kind not in ISOLATED_KINDS:
        return await asyncio.to_thread(extract, kind, data, max_pages=max_pages)
    reasons = _Reasons.of(kind)
    cpu_seconds = math.ceil(timeout_s) + 1
    process = await asyncio.create_subprocess_exec(
        *_worker_command(kind, memory_mb, cpu_seconds, max_pages),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=_IMPORT_ROOT,
        # Its own session: a Ctrl-C meant for the service must not reach the child mid-write,
        # the service decides when the child ends.
        start_new_session=True,
    )
    timed_out = False
    stdout = stderr = b""
    try:
        async with asyncio.timeout(timeout_s):
            stdout, stderr = await process.communicate(data)
    except TimeoutError:
        timed_out = True
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            # Shielded: even if this task is cancelled again, the wait completes and reaps the child.
            await asyncio.shield(process.wait())
    if timed_out:
        raise ExtractionError(reasons.too_slow.format(seconds=timeout_s))
    return _read_answer(process.returncode, stdout, stderr, reasons=reasons, timeout_s=timeout_s)


@dataclass(frozen=True, slots=True)
class _Reasons:
    """What a failed child says, in the words of the kind of file it was reading."""

    too_slow: str
    too_big: str
    crashed: str

    @classmethod
    def of(cls, kind: SourceKind) -> _Reasons:
        if kind == "pdf":
            return cls(PDF_TOO_SLOW, PDF_TOO_BIG, PDF_CRASHED)
        noun = OFFICE_NOUNS[kind]
        return cls(
            OFFICE_TOO_SLOW.replace("{noun}", noun),
            OFFICE_TOO_BIG.format(noun=noun),
            OFFICE_CRASHED.format(noun=noun),
        )


def _worker_command(kind: SourceKind, memory_mb: int, cpu_seconds: int, max_pages: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        _WORKER_MODULE,
        kind,
        str(memory_mb),
        str(cpu_seconds),
        str(max_pages),
        str(os.getpid()),
    ]


def _read_answer(
    returncode: int | None, stdout: bytes, stderr: bytes, *, reasons: _Reasons, timeout_s: float
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
