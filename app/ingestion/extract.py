"""Turn uploaded bytes into text sections for chunking.

`sniff_kind` (app.ingestion.sniff) decides what an upload is, `extract` reads it in-process,
and `extract_isolated` is what the service should call: it reads PDFs in a separate,
resource-limited process, because a hostile PDF can make a parser spin or allocate without bound.
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
from pathlib import Path

from app.ingestion.extract_markup import extract_html, extract_markdown
from app.ingestion.extract_model import (
    DEFAULT_MAX_PAGES,
    NO_TEXT,
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
_KINDS: dict[str, SourceKind] = {"text": "text", "markdown": "markdown", "html": "html", "pdf": "pdf"}


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
    """Extract without risking the service: PDFs run in a child process with hard limits.

    The child gets `memory_mb` of address space and a CPU-time limit, and is killed once
    `timeout_s` of wall-clock time has passed; it is always reaped, also when this coroutine
    is cancelled. Text, markdown and HTML are parsed in a thread, as they cannot blow up the
    same way. The bytes decide the kind: a PDF is read as one, in the child, whatever it was called.
    """
    kind = kind_of_bytes(kind, data)
    if kind != "pdf":
        return await asyncio.to_thread(extract, kind, data, max_pages=max_pages)
    cpu_seconds = math.ceil(timeout_s) + 1
    process = await asyncio.create_subprocess_exec(
        *_worker_command(memory_mb, cpu_seconds, max_pages),
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
        raise ExtractionError(PDF_TOO_SLOW.format(seconds=timeout_s))
    return _read_answer(process.returncode, stdout, stderr, timeout_s=timeout_s)


def _worker_command(memory_mb: int, cpu_seconds: int, max_pages: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        _WORKER_MODULE,
        str(memory_mb),
        str(cpu_seconds),
        str(max_pages),
        str(os.getpid()),
    ]


def _read_answer(returncode: int | None, stdout: bytes, stderr: bytes, *, timeout_s: float) -> Extracted:
    if returncode == -signal.SIGXCPU:
        # The CPU-time limit is a backstop just above the wall-clock one.
        raise ExtractionError(PDF_TOO_SLOW.format(seconds=timeout_s))
    if returncode != 0:
        tail = stderr[-_STDERR_TAIL:].decode("utf-8", errors="replace")
        logger.warning("PDF worker ended with status %s: %s", returncode, tail)
        if returncode == -signal.SIGKILL:
            # Not killed by us (that is the timeout path): the kernel's out-of-memory killer.
            raise ExtractionError(PDF_TOO_BIG)
        raise ExtractionError(PDF_CRASHED)
    try:
        return _decode_answer(json.loads(stdout))
    except (ValueError, TypeError, KeyError) as exc:
        logger.warning("PDF worker wrote an unreadable answer: %r", stdout[:200])
        raise ExtractionError(PDF_CRASHED) from exc


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
        and isinstance(pages_total, int)
        and isinstance(pages_skipped, int)
        and isinstance(raw_sections, list)
    ):
        raise TypeError("malformed answer")
    sections: list[Section] = []
    for item in raw_sections:
        if not (isinstance(item, list) and len(item) == 2):
            raise TypeError("malformed section")
        page, text = item
        if not (isinstance(page, int) and isinstance(text, str) and text):
            raise TypeError("malformed section")
        sections.append(Section(text=text, heading=None, page=page))
    if not sections:
        raise ExtractionError(NO_TEXT)
    return Extracted(title=title, sections=sections, pages_total=pages_total, pages_skipped=pages_skipped)
