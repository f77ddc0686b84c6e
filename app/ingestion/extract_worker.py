"""Child process that extracts one PDF or Office file under hard resource limits.

Started by extract.extract_isolated as
``python -m app.ingestion.extract_worker KIND MEMORY_MB CPU_SECONDS MAX_PAGES PARENT_PID FIRST_PAGE
CHARSET`` (KIND: pdf, docx, pptx, xlsx, or html, markdown, csv when large; CHARSET: an HTTP
header's label, or empty) with the file on stdin.

An Office file or markup gets one JSON object on stdout: ``{"ok": true, "title": ..., "pages_total":
..., "pages_skipped": ..., "sections": [[heading, page, text], ...]}`` or ``{"ok": false,
"reason": "..."}``.

A PDF is reported page by page, one JSON object a line, each flushed as soon as it is known,
so that what was read survives a crash on a later page: ``{"outline": {"title": ...,
"pages_total": ..., "repaired": ...}}``, then ``{"page": [index, text or null,
out_of_memory, unmapped]}`` for each page from FIRST_PAGE (0-based), then ``{"done": true}``; or
``{"retry": index}`` when a page ran out of memory after others were read (a fresh process
gets a go at it); or ``{"ok": false, "reason": "..."}`` when the file cannot be opened.

JSON rather than pickle: a child that a hostile file managed to subvert must not be able to
run code in the parent by what it writes back.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from typing import BinaryIO, cast

from app.ingestion.extract_model import (
    ISOLATED_KINDS,
    MARKUP_NOUNS,
    ChildReasons,
    ExtractionError,
    SourceKind,
)

_PR_SET_PDEATHSIG = 1
_ARGUMENT_COUNT = 7
_KINDS = ISOLATED_KINDS | MARKUP_NOUNS.keys()


def main(argv: list[str]) -> int:
    """Run one extraction; the exit status is 0 whenever a JSON answer was written."""
    if len(argv) != _ARGUMENT_COUNT or argv[0] not in _KINDS:
        sys.stderr.write(
            "usage: extract_worker pdf|docx|pptx|xlsx|html|markdown|csv"
            " MEMORY_MB CPU_SECONDS MAX_PAGES PARENT_PID FIRST_PAGE CHARSET\n"
        )
        return 2
    kind = cast("SourceKind", argv[0])
    memory_mb, cpu_seconds, max_pages, parent_pid, first_page = (int(value) for value in argv[1:6])
    charset = argv[6] or None
    _die_with_parent(parent_pid)
    _limit_resources(memory_mb, cpu_seconds)
    answer = _private_stdout()
    data = sys.stdin.buffer.read()
    _quiet_libraries()
    too_big = ChildReasons.of(kind).too_big
    try:
        if kind == "pdf":
            _report_pdf(data, max_pages, first_page, answer)
            return 0
        body = _extract_whole(kind, data, charset)
    except ExtractionError as exc:
        body = {"ok": False, "reason": str(exc)}
    except MemoryError:
        body = {"ok": False, "reason": too_big}
    _write(answer, body)
    return 0


def _report_pdf(data: bytes, max_pages: int, first_page: int, answer: BinaryIO) -> None:
    # Imported after the limits are set so that even import-time allocation is bounded.
    from app.ingestion.extract_pdf import PdfPages  # noqa: PLC0415

    with PdfPages(data) as document:
        outline = document.outline
        _write(
            answer,
            {
                "outline": {
                    "title": outline.title,
                    "pages_total": outline.pages_total,
                    "repaired": outline.repaired,
                }
            },
        )
        for index in range(first_page, min(outline.pages_total, max_pages)):
            page = document.read(index)
            if page.out_of_memory and index > first_page:
                # Memory this process holds for earlier pages may be what ran out.
                _write(answer, {"retry": index})
                return
            _write(answer, {"page": [index, page.text, page.out_of_memory, page.unmapped]})
    _write(answer, {"done": True})


def _write(answer: BinaryIO, body: dict[str, object]) -> None:
    answer.write(json.dumps(body).encode("ascii") + b"\n")
    answer.flush()


def _quiet_libraries() -> None:
    import logging  # noqa: PLC0415
    import warnings  # noqa: PLC0415

    # pypdf logs (with whole font dictionaries) for every oddity of a file, openpyxl warns of
    # every extension it does not know; the parent buffers stderr only to report crashes, so
    # a hostile file must not be able to fill it.
    logging.basicConfig(level=logging.CRITICAL)
    warnings.simplefilter("ignore")


def _extract_whole(kind: SourceKind, data: bytes, charset: str | None) -> dict[str, object]:
    # Imported after the limits are set so that even import-time allocation is bounded.
    from app.ingestion.extract import extract  # noqa: PLC0415

    result = extract(kind, data, charset=charset)
    return {
        "ok": True,
        "title": result.title,
        "pages_total": result.pages_total,
        "pages_skipped": result.pages_skipped,
        "sections": [[section.heading, section.page, section.text] for section in result.sections],
    }


def _die_with_parent(parent_pid: int) -> None:
    """Linux: have the kernel kill this process if the service dies, so no orphan keeps working."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes  # noqa: PLC0415 - Linux only

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:
        # The parent died before prctl took effect.
        os._exit(1)


def _limit_resources(memory_mb: int, cpu_seconds: int) -> None:
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    # SIGXCPU at the soft limit ends the process; the hard limit is only a backstop. The
    # parent's wall-clock timeout normally comes first.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    # A crash of a native parser must not write a core file of the document.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _private_stdout() -> BinaryIO:
    """Keep stdout for the answer alone; stray native prints go to stderr instead."""
    answer = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return answer


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
