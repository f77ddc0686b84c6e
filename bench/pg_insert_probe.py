"""How much an HNSW index costs PostgreSQL per inserted vector, on this machine.

The ingestion benchmark showed PostgreSQL, not Python, using both cores. This probe isolates
the chunk insert: it writes the same number of random 1,536-dimensional vectors, in batches of
one document's chunks, through the same ``unnest(...)::vector`` statement shape the worker
uses, into a table without a vector index, with the service's HNSW expression index
(``(embedding::vector(1536)) vector_cosine_ops``, pgvector defaults m=16, ef_construction=64),
and without an index followed by one ``CREATE INDEX``. It reports wall time and the
backend's CPU time per vector.

    .venv/bin/python bench/pg_insert_probe.py --vectors 6000 --batch 6

It starts its own embedded PostgreSQL in a temporary folder and removes it at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import psutil

TABLE = """
CREATE TABLE probe (
    id bigserial PRIMARY KEY,
    document int NOT NULL,
    embedding_dim int NOT NULL,
    embedding vector NOT NULL
)
"""
HNSW = (
    "CREATE INDEX probe_hnsw ON probe USING hnsw ((embedding::vector({dim})) vector_cosine_ops) "
    "WHERE embedding_dim = {dim}"
)
INSERT = """
INSERT INTO probe (document, embedding_dim, embedding)
SELECT $1, $2, e::vector FROM unnest($3::text[]) AS u(e)
"""


def _vectors(count: int, dim: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((count, dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    # The text form the worker sends (json.dumps of the floats).
    return [json.dumps(row.tolist(), separators=(",", ":")) for row in matrix]


async def _backend_cpu(conn: asyncpg.Connection) -> float:
    pid = await conn.fetchval("SELECT pg_backend_pid()")
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


async def _variant(uri: str, name: str, vectors: list[str], dim: int, batch: int) -> dict[str, Any]:
    conn = await asyncpg.connect(uri)
    try:
        await conn.execute("DROP TABLE IF EXISTS probe")
        await conn.execute(TABLE)
        if name == "hnsw":
            await conn.execute(HNSW.format(dim=dim))
        cpu, wall = await _backend_cpu(conn), time.perf_counter()
        for doc, start in enumerate(range(0, len(vectors), batch)):
            await conn.execute(INSERT, doc, dim, vectors[start : start + batch])
        insert_s = time.perf_counter() - wall
        build_s = 0.0
        if name == "bulk_then_index":
            started = time.perf_counter()
            await conn.execute(HNSW.format(dim=dim))
            build_s = time.perf_counter() - started
        cpu_s = await _backend_cpu(conn) - cpu
        total = insert_s + build_s
        return {
            "variant": name,
            "vectors": len(vectors),
            "insert_s": round(insert_s, 2),
            "index_build_s": round(build_s, 2),
            "total_s": round(total, 2),
            "ms_per_vector": round(1000 * total / len(vectors), 2),
            "backend_cpu_s": round(cpu_s, 2),
        }
    finally:
        await conn.close()


async def _run(uri: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(uri)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    finally:
        await conn.close()
    vectors = _vectors(args.vectors, args.dim, seed=7)
    results = []
    for name in ("no_vector_index", "hnsw", "bulk_then_index"):
        result = await _variant(uri, name, vectors, args.dim, args.batch)
        print(
            f"{name:<17} {result['total_s']:>7} s  ({result['ms_per_vector']} ms/vector; "
            f"insert {result['insert_s']} s, index build {result['index_build_s']} s, "
            f"backend CPU {result['backend_cpu_s']} s)",
            flush=True,
        )
        results.append(result)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", type=int, default=6000)
    parser.add_argument("--dim", type=int, default=1536)
    parser.add_argument("--batch", type=int, default=6, help="vectors per INSERT (one document's chunks)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import pgserver  # noqa: PLC0415 - heavy import, only when running

    tmp = Path(tempfile.mkdtemp(prefix="vk-pg-probe-"))
    server = pgserver.get_server(tmp / "pg", cleanup_mode="stop")
    try:
        results = asyncio.run(_run(server.get_uri(), args))
    finally:
        server.cleanup()  # stops the server: this process is its only user
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
