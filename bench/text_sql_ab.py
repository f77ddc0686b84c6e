"""BM25 statement A/B: the ``TEXT_SQL`` of another git revision against the working tree's, on
the latency benchmark's data (100 KBs x 1,000 chunks by default), one question at a time,
both statements on the same connection in alternating order.

A change to the statement is judged here rather than by ``query_bench``'s serial SQL figures,
which move by +-20 % between runs on this machine: alternating on one connection puts both
statements under the same conditions. It prints each statement's p50 / p90 and how far the
rankings differ (order of chunk ids, largest score difference).

Run from the repository root, e.g. for the float8 change (docs/BENCHMARKS.md)::

    .venv/bin/python bench/text_sql_ab.py --base c6fa52d^
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from app.query import repository as current  # noqa: E402
from bench.seed import (  # noqa: E402
    BenchError,
    Harness,
    QuestionMaker,
    SeedConfig,
    SeedResult,
    finish_report,
    machine_info,
    now_iso,
    percentiles,
    pg_connect,
    reported_failure,
    seed_database,
    service_env,
    terminate_on_sigterm,
)


def text_sql_at(revision: str) -> str:
    """``TEXT_SQL`` as app/query/repository.py defines it at ``revision`` (a module of strings)."""
    done = subprocess.run(
        ["git", "show", f"{revision}:app/query/repository.py"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise BenchError(f"git show {revision}: {done.stderr.strip()}")
    namespace: dict[str, Any] = {}
    exec(compile(done.stdout, f"{revision}:app/query/repository.py", "exec"), namespace)
    return str(namespace["TEXT_SQL"])


async def compare(
    pgdir: Path, seed: SeedResult, statements: dict[str, str], questions: int, chunks_per_kb: int
) -> dict[str, Any]:
    conn = await pg_connect(pgdir)
    try:
        # As the service's connections (PostgreSQL's default plan caching). Each agent reads one
        # seeded KB of ``chunks_per_kb`` chunks, BM25's document count.
        await conn.execute("SET plan_cache_mode = auto")
        kb_of = dict(zip(seed.agent_ids, seed.kb_ids, strict=True))
        maker = QuestionMaker.of(seed, 11)
        items = [maker.one() for _ in range(questions)]
        names = list(statements)

        async def run(name: str, agent: str, question: str) -> list[Any]:
            kbs = [uuid.UUID(kb_of[agent])]
            return list(await conn.fetch(statements[name], kbs, question, "english", chunks_per_kb, 30))

        for agent, question in items:  # warm caches and the statement cache first
            for name in names:
                await run(name, agent, question)
        times: dict[str, list[float]] = {name: [] for name in names}
        ranks: dict[str, list[list[Any]]] = {name: [] for name in names}
        for i, (agent, question) in enumerate(items):
            for name in names if i % 2 else names[::-1]:
                started = time.perf_counter()
                rows = await run(name, agent, question)
                times[name].append((time.perf_counter() - started) * 1000)
                ranks[name].append([(r["id"], r["rank"]) for r in rows])
    finally:
        await conn.close()
    base, new = names
    same_order = sum(
        [i for i, _ in a] == [i for i, _ in b] for a, b in zip(ranks[base], ranks[new], strict=True)
    )
    # Compared where both lists have a chunk (the same length unless the order differs).
    pairs = [(x, y) for a, b in zip(ranks[base], ranks[new], strict=True) for x, y in zip(a, b, strict=False)]
    largest = max((abs(x[1] - y[1]) for x, y in pairs), default=0.0)
    return {
        "questions": questions,
        "ms": {name: percentiles(v) for name, v in times.items()},
        "same_order": same_order,
        "largest_score_difference": largest,
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="git revision whose TEXT_SQL is compared")
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--kbs", type=int, default=100)
    parser.add_argument("--chunks-per-kb", type=int, default=1000)
    parser.add_argument("--dims", type=int, default=512)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    return parser.parse_args(argv)


def print_report(result: dict[str, Any]) -> None:
    print(f"\n== TEXT_SQL A/B: {result['base']} against the working tree ==")
    if "error" in result or "comparison" not in result:
        return
    c = result["comparison"]
    for name, p in c["ms"].items():
        print(f"{name:<14} p50 {p['p50']:.2f} ms, p90 {p['p90']:.2f} ms")
    print(
        f"same order of chunks for {c['same_order']} of {c['questions']} questions; "
        f"largest score difference {c['largest_score_difference']:.3g}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    terminate_on_sigterm()
    started = time.perf_counter()
    result: dict[str, Any] = {
        "benchmark": "BM25 statement A/B",
        "date": now_iso(),
        "command": " ".join([".venv/bin/python", *sys.argv]),
        "machine": machine_info(),
        "base": args.base,
    }
    statements = {f"base {args.base}": text_sql_at(args.base), "working tree": current.TEXT_SQL}
    harness = Harness.create("vk-text-sql-ab-")
    with reported_failure(harness, result) as outcome:
        harness.start_stub(dims=args.dims)
        assert harness.stub is not None
        harness.create_org(service_env(harness.pgdir, harness.stub.base_url, dims=args.dims), "ab")
        cfg = SeedConfig(kbs=args.kbs, chunks_per_kb=args.chunks_per_kb, dims=args.dims, build_index=False)
        seed = asyncio.run(seed_database(harness.pgdir, cfg))
        comparison = compare(harness.pgdir, seed, statements, args.questions, cfg.chunks_per_kb)
        result["comparison"] = asyncio.run(comparison)
    finish_report(result, started, print_report, args.json)
    return outcome.status


if __name__ == "__main__":
    sys.exit(main())
