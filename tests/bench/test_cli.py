"""Every benchmark runs as ``python -m bench.<name>``: each module imports from a fresh
interpreter started in the repository root, and its ``--help`` exits 0 without running it."""

import subprocess
import sys

import pytest

from app.config import PROJECT_ROOT

BENCHMARKS = (
    "burst", "calibrate", "console", "context_eval", "crawl", "embed", "html_extraction", "ingest", "isolation", "load",
    "office_extraction", "openai_stub", "prompt_render", "provider_client", "query", "reference_app", "seed", "semantic_cache_eval", "speech",
    "stream", "sync", "webhook_trigger",
)  # fmt: skip


@pytest.mark.parametrize("name", BENCHMARKS)
def test_help_exits_zero(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{name}", "--help"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("usage: ")


def test_every_benchmark_module_is_listed() -> None:
    libraries = {"__init__", "corpus", "harness", "instrumented_serve", "metering", "report"}
    modules = {p.stem for p in (PROJECT_ROOT / "bench").glob("*.py")} - libraries
    assert modules == set(BENCHMARKS)
