"""Child process that extracts one PDF under hard resource limits.

Started by extract.extract_isolated as
``python -m app.ingestion.extract_worker MEMORY_MB CPU_SECONDS MAX_PAGES PARENT_PID``
with the PDF on stdin. Writes one JSON object to stdout:
``{"ok": true, "title": ..., "pages_total": ..., "pages_skipped": ..., "sections": [[page, text], ...]}``
or ``{"ok": false, "reason": "..."}``.

JSON rather than pickle: a child that a hostile PDF managed to subvert must not be able to
run code in the parent by what it writes back.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from typing import BinaryIO

from app.ingestion.extract_model import PDF_TOO_BIG, ExtractionError

_PR_SET_PDEATHSIG = 1
_ARGUMENT_COUNT = 4


def main(argv: list[str]) -> int:
    """Run one extraction; the exit status is 0 whenever a JSON answer was written."""
    if len(argv) != _ARGUMENT_COUNT:
        sys.stderr.write("usage: extract_worker MEMORY_MB CPU_SECONDS MAX_PAGES PARENT_PID\n")
        return 2
    memory_mb, cpu_seconds, max_pages, parent_pid = (int(value) for value in argv)
    _die_with_parent(parent_pid)
    _limit_resources(memory_mb, cpu_seconds)
    answer = _private_stdout()
    data = sys.stdin.buffer.read()
    try:
        body = json.dumps(_extract(data, max_pages)).encode("ascii")
    except MemoryError:
        body = json.dumps({"ok": False, "reason": PDF_TOO_BIG}).encode("ascii")
    answer.write(body)
    answer.flush()
    return 0


def _extract(data: bytes, max_pages: int) -> dict[str, object]:
    # Imported after the limits are set so that even import-time allocation is bounded.
    import logging  # noqa: PLC0415

    from app.ingestion.extract_pdf import extract_pdf  # noqa: PLC0415

    # pypdf logs (with whole font dictionaries) for every oddity of a file; the parent buffers
    # stderr only to report crashes, so a hostile file must not be able to fill it.
    logging.basicConfig(level=logging.CRITICAL)
    try:
        result = extract_pdf(data, max_pages=max_pages)
    except ExtractionError as exc:
        return {"ok": False, "reason": str(exc)}
    return {
        "ok": True,
        "title": result.title,
        "pages_total": result.pages_total,
        "pages_skipped": result.pages_skipped,
        "sections": [[section.page, section.text] for section in result.sections],
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
