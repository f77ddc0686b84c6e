"""The offline embedder's own costs: a question on one core, and documents' word pieces a second.

Questions come from callers-dev and a squad-dev sample (``../shared/eval``), or a built-in list
when that folder is absent. Each precision is timed in turns (int8, fp32, int8, ...) so both
see the same machine. Run from the repository root::

    .venv/bin/python -m bench.embed
    .venv/bin/python -m bench.embed --rounds 5 --precisions int8

Prints p50/p99 of one question's embedding (tokenising, the model, normalising: what a call
waits for), single-threaded as the service runs it, then documents' throughput on one thread,
the process's resident memory after loading, and the load time from the kept model file.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np
import psutil

from app.embeddings.minilm import MiniLMEmbedder

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "eval"
FALLBACK = [
    "What are your opening hours?",
    "Hi, um, how much does teeth whitening cost?",
    "Yeah it's Saturday morning and I cracked a molar, can anybody see me today?",
    "Do you take credit cards?",
]


def questions(limit: int) -> list[str]:
    found: list[str] = []
    for path in (SHARED / "callers-dev" / "questions.jsonl", SHARED / "squad-dev" / "questions.jsonl"):
        if path.is_file():
            found += [json.loads(line)["question"] for line in path.read_text().splitlines() if line.strip()]
    if not found:
        return FALLBACK
    random.Random(7).shuffle(found)
    return found[:limit]


def documents() -> list[str]:
    folder = SHARED / "squad-dev" / "docs"
    if folder.is_dir():
        return [p.read_text() for p in sorted(folder.glob("*.md"))[:4]]
    return [" ".join(FALLBACK * 200)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=int, default=400, help="questions per round (default 400)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--precisions", default="int8,fp32", help="comma-separated (default int8,fp32)")
    parser.add_argument("--cache-dir", type=Path, default=Path(".data/models"), help="kept model files")
    args = parser.parse_args()

    texts = questions(args.questions)
    embedders: dict[str, MiniLMEmbedder] = {}
    process = psutil.Process()
    for precision in args.precisions.split(","):
        MiniLMEmbedder(precision=precision, cache_dir=args.cache_dir)  # build and keep the file once
        before = process.memory_info().rss
        t = time.perf_counter()
        embedders[precision] = MiniLMEmbedder(precision=precision, cache_dir=args.cache_dir)  # type: ignore[arg-type]
        elapsed = (time.perf_counter() - t) * 1000
        embedders[precision].encode_many(["warm up"])
        grown = (process.memory_info().rss - before) / 1e6
        print(f"{precision}: loaded from the kept file in {elapsed:.0f} ms; resident memory +{grown:.0f} MB")
    pieces = [len(ids) for ids in next(iter(embedders.values())).token_ids(texts)]
    print(f"{len(texts)} questions, word pieces p50 {np.percentile(pieces, 50):.0f}, max {max(pieces)}")

    timings: dict[str, list[float]] = {p: [] for p in embedders}
    for _ in range(args.rounds):
        for precision, embedder in embedders.items():
            for text in texts:
                t = time.perf_counter()
                embedder.encode_many([text])
                timings[precision].append((time.perf_counter() - t) * 1000)
    for precision, values in timings.items():
        print(
            f"{precision}: question embedding p50 {np.percentile(values, 50):.2f} ms, "
            f"p99 {np.percentile(values, 99):.2f} ms ({len(values)} questions, one thread)"
        )

    docs = documents()
    for precision, embedder in embedders.items():
        total = sum(len(ids) for ids in embedder.token_ids(docs))
        t = time.perf_counter()
        embedder._encode([w for ids in embedder.token_ids(docs) for w in _split(ids)])
        elapsed = time.perf_counter() - t
        print(f"{precision}: documents {total / elapsed:,.0f} word pieces/s on one thread ({total:,} pieces)")


def _split(ids: list[int]) -> list[list[int]]:
    return [ids[i : i + 254] for i in range(0, len(ids), 254)]


if __name__ == "__main__":
    main()
