"""The in-memory search of app/query/kb_vectors.py on its own, no database: building a KB's
copy from rows as PostgreSQL sends them, the search and fusion per call, and the CPU the
process uses between paced calls (OpenBLAS's worker threads spin after a BLAS call; the
copy's search avoids BLAS for that reason).

Run from the repository root::

    .venv/bin/python bench/kb_vectors_bench.py                 # 1,000 x 512 and 20,000 x 1,536
    .venv/bin/python bench/kb_vectors_bench.py --sizes 5000x1536 --calls 2000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from app.query.kb_vectors import KBVectors  # noqa: E402
from app.query.retrieval import Retriever, TextHits  # noqa: E402


def rows_of(n: int, dim: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """KB_VECTORS_SQL's rows: vector_send's bytes, 500-token-sized texts, 50 chunks a document."""
    header = dim.to_bytes(2, "big") + b"\0\0"
    return [
        {
            "version": 1,
            "changed": None,
            "id": i + 1,
            "v": header + rng.standard_normal(dim).astype(">f4").tobytes(),
            "document_id": uuid.UUID(int=i // 50 + 1),
            "title": f"Document {i // 50}",
            "section": None,
            "page": None,
            "text": "word " * 400,
        }
        for i in range(n)
    ]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    return asyncio.run(_main())


async def _main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000x512,20000x1536", help="chunks x dimensions, comma-separated")
    parser.add_argument("--calls", type=int, default=1000, help="searches per size")
    parser.add_argument("--candidates", type=int, default=30)
    parser.add_argument("--top-k", type=int, default=6)
    parser.add_argument("--paced-calls", type=int, default=50, help="searches 20 ms apart for the CPU check")
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    columns = ("KB", "build ms", "MB held", "search p50 us", "p99 us", "paced CPU/wall")
    print(" ".join(f"{c:>{w}}" for c, w in zip(columns, (12, 9, 8, 14, 8, 15), strict=True)))
    for size in args.sizes.split(","):
        n, dim = (int(x) for x in size.lower().split("x"))
        rows = rows_of(n, dim, rng)
        builds = []
        for _ in range(3):
            t = time.perf_counter()
            copy = KBVectors.from_rows(uuid.uuid4(), rows)
            builds.append(time.perf_counter() - t)
        retriever = Retriever(dimensions=dim, pgvector_version=(0, 6, 2), exact_max_chunks=20_000, rrf_k=60)
        text = TextHits(list(range(1, 31)), [float(30 - i) for i in range(30)])  # a BM25 list to fuse
        questions = [rng.standard_normal(dim).tolist() for _ in range(args.calls)]
        spent = []
        for vector in questions:
            t = time.perf_counter()
            await retriever.fuse_memory(
                [copy], text=text, vector=vector, candidates=args.candidates, top_k=args.top_k
            )
            spent.append(time.perf_counter() - t)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for vector in questions[: args.paced_calls]:
            await retriever.fuse_memory(
                [copy], text=text, vector=vector, candidates=args.candidates, top_k=args.top_k
            )
            time.sleep(0.02)  # noqa: ASYNC251 - the pause is the point: a paced caller's idle time
        paced = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
        print(
            f"{size:>12} {min(builds) * 1000:9.1f} {copy.nbytes / 1e6:8.1f} "
            f"{pct(spent, 0.5) * 1e6:14.0f} {pct(spent, 0.99) * 1e6:8.0f} {paced:15.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
