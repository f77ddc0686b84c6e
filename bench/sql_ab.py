"""Retrieval statement A/B: a statement of the query path at another git revision against the
working tree's, on the latency benchmark's data (100 KBs x 1,000 chunks by default), one
question at a time, both statements on the same connection in alternating order.

``--statement text`` compares BM25 (``TEXT_SQL``); ``--statement vector`` compares the exact
vector search fused with BM25's list (``FUSED_SQL`` with ``VECTOR_EXACT``), for a random unit
vector per question and the working tree's BM25 hits.

A change to a statement is judged here rather than by ``query_bench``'s serial SQL figures,
which move by +-20 % between runs on this machine: alternating on one connection puts both
statements under the same conditions. It prints each statement's p50 / p90 and how far the
rankings differ (order of chunk ids, largest score difference).

Run from the repository root, e.g. for the float8 change and the inner product
(docs/BENCHMARKS.md)::

    .venv/bin/python bench/sql_ab.py --base c6fa52d^
    .venv/bin/python bench/sql_ab.py --statement vector --base 0b4c1a3^
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

import numpy as np  # noqa: E402

from app.query import repository as current  # noqa: E402
from bench.seed import (  # noqa: E402
    BenchError,
    Harness,
    QuestionMaker,
    SeedConfig,
    SeedResult,
    finish_report,
    machine_info,
    model_key,
    now_iso,
    percentiles,
    pg_connect,
    reported_failure,
    seed_database,
    service_env,
    terminate_on_sigterm,
)


def statement_at(revision: str, kind: str) -> str:
    """The ``kind`` statement as app/query/repository.py defines it at ``revision`` (a module of
    strings)."""
    done = subprocess.run(
        ["git", "show", f"{revision}:app/query/repository.py"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise BenchError(f"git show {revision}: {done.stderr.strip()}")
    namespace: dict[str, Any] = {}
    exec(compile(done.stdout, f"{revision}:app/query/repository.py", "exec"), namespace)
    return _statement(namespace, kind)


def _statement(module: dict[str, Any], kind: str) -> str:
    if kind == "text":
        return str(module["TEXT_SQL"])
    return str(module["FUSED_SQL"]).format(vector_candidates=module["VECTOR_EXACT"])


async def compare(
    pgdir: Path,
    seed: SeedResult,
    statements: dict[str, str],
    kind: str,
    questions: int,
    chunks_per_kb: int,
    dims: int,
) -> dict[str, Any]:
    conn = await pg_connect(pgdir)
    try:
        # As the service's connections: a custom plan for every execution. Each agent reads one
        # seeded KB of ``chunks_per_kb`` chunks, BM25's document count.
        await conn.execute("SET plan_cache_mode = force_custom_plan")
        kb_of = dict(zip(seed.agent_ids, seed.kb_ids, strict=True))
        maker = QuestionMaker(seed.material, seed=11)
        rng = np.random.default_rng(11)
        items = []
        for _ in range(questions):
            agent, question = maker.one()
            kbs = [uuid.UUID(kb_of[agent])]
            vector = rng.standard_normal(dims)
            args: tuple[Any, ...] = (kbs, question, "english", chunks_per_kb, 30)
            if kind == "vector":
                # As Retriever.fuse: a unit vector, the agent's KBs, model, 30 candidates, RRF k
                # 60, top 8, equal weights, and BM25's hits for the question.
                bm25 = await conn.fetch(current.TEXT_SQL, *args)
                args = (
                    (vector / np.linalg.norm(vector)).tolist(), kbs, model_key(dims), 30, 60, 8,
                    model_key(dims), 1.0, [r["id"] for r in bm25], [r["rank"] for r in bm25],
                )  # fmt: skip
            items.append(args)
        names = list(statements)
        score = "rank" if kind == "text" else "similarity"

        for args in items:  # warm caches and the statement cache first
            for name in names:
                await conn.fetch(statements[name], *args)
        times: dict[str, list[float]] = {name: [] for name in names}
        ranks: dict[str, list[list[Any]]] = {name: [] for name in names}
        for i, args in enumerate(items):
            for name in names if i % 2 else names[::-1]:
                started = time.perf_counter()
                rows = await conn.fetch(statements[name], *args)
                times[name].append((time.perf_counter() - started) * 1000)
                ranks[name].append([(r["id"], r[score] or 0.0) for r in rows])
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
    parser.add_argument("--base", required=True, help="git revision whose statement is compared")
    parser.add_argument(
        "--statement", choices=("text", "vector"), default="text",
        help="text: BM25 (TEXT_SQL); vector: exact vector search fused with BM25 (FUSED_SQL)",
    )  # fmt: skip
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--kbs", type=int, default=100)
    parser.add_argument("--chunks-per-kb", type=int, default=1000)
    parser.add_argument("--dims", type=int, default=512)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    return parser.parse_args(argv)


def print_report(result: dict[str, Any]) -> None:
    print(f"\n== {result['statement']} statement A/B: {result['base']} against the working tree ==")
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
        "benchmark": "retrieval statement A/B",
        "statement": args.statement,
        "date": now_iso(),
        "command": " ".join([".venv/bin/python", *sys.argv]),
        "machine": machine_info(),
        "base": args.base,
    }
    statements = {
        f"base {args.base}": statement_at(args.base, args.statement),
        "working tree": _statement(vars(current), args.statement),
    }
    harness = Harness.create("vk-sql-ab-")
    with reported_failure(harness, result) as outcome:
        harness.start_stub(dims=args.dims)
        assert harness.stub is not None
        harness.create_org(service_env(harness.pgdir, harness.stub.base_url, dims=args.dims), "ab")
        cfg = SeedConfig(kbs=args.kbs, chunks_per_kb=args.chunks_per_kb, dims=args.dims, build_index=False)
        seed = asyncio.run(seed_database(harness.pgdir, cfg))
        comparison = compare(
            harness.pgdir, seed, statements, args.statement, args.questions, cfg.chunks_per_kb, cfg.dims
        )
        result["comparison"] = asyncio.run(comparison)
    finish_report(result, started, print_report, args.json)
    return outcome.status


if __name__ == "__main__":
    sys.exit(main())
