"""How long does ``vk sync`` take to mirror a folder, and what does a re-sync cost?

On one ``vk serve`` with the defaults of a fresh install (the offline minilm embedder, the
ingestion worker process), into a fresh knowledge base:

1. a folder of ``--files`` generated markdown pages (``bench.corpus``, 2-5 KB each, in
   twenty sub-folders) is synced with ``vk sync --wait``: wall time until every document is
   ready;
2. ``--change`` of the files get a new paragraph and the folder is synced again;
3. the folder is synced once more, unchanged.

Each run is the real command line, as CI would run it. "Embeddings computed" counts the
rows the run added to ``embedding_cache``, where ingestion stores every vector it computes
(chunks, and minilm's sentence vectors): a re-sync should add only the changed files'.

Run from the repository root::

    .venv/bin/python -m bench.sync --json /tmp/sync.json
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.corpus import make_document
from bench.harness import (
    BenchError,
    Harness,
    offline_env,
    reported_failure,
    tail,
    terminate_on_sigterm,
    vk_command,
)
from bench.metering import loadavg, machine_info
from bench.report import finish_report, now_iso


def write_folder(root: Path, count: int, seed: int) -> list[Path]:
    rng = random.Random(seed)
    paths = []
    for index in range(count):
        _, body = make_document(rng, index, rng.randint(2000, 5000))
        path = root / f"section-{index % 20:02d}" / f"page-{index:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        paths.append(path)
    return paths


def counts(harness: Harness, kb_id: str) -> dict[str, int]:
    return harness.fetchrow(
        "SELECT (SELECT count(*) FROM embedding_cache) AS embeddings,"
        " (SELECT count(*) FROM chunks WHERE kb_id = $1) AS chunks,"
        " (SELECT count(*) FROM documents WHERE kb_id = $1 AND status = 'ready') AS ready",
        kb_id,
    )


def sync_once(harness: Harness, env: dict[str, str], folder: Path, kb_id: str, name: str) -> dict[str, Any]:
    before = counts(harness, kb_id)
    log = harness.tmp / f"sync-{name}.log"
    started = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(
            vk_command("sync", str(folder), "--kb", kb_id, "--wait", "--delete-missing"),
            env=env, stdout=out, stderr=subprocess.STDOUT, timeout=7200, check=False,
        )  # fmt: skip
    wall = round(time.perf_counter() - started, 1)
    output = log.read_text()
    if done.returncode != 0:
        raise BenchError(f"vk sync ({name}) exited with {done.returncode}:\n{tail(output)}")
    after = counts(harness, kb_id)
    plan = next(line for line in output.splitlines() if line.startswith("plan:"))
    step = {
        "wall_s": wall,
        "plan": plan,
        "embeddings_computed": after["embeddings"] - before["embeddings"],
        "chunks_in_kb": after["chunks"],
        "documents_ready": after["ready"],
        "loadavg_after": loadavg(),
    }
    print(f"{name}: {wall} s, {step['embeddings_computed']} embeddings computed; {plan}", flush=True)
    return step


def change_files(paths: Sequence[Path], count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    changed = rng.sample(list(paths), count)
    for path in changed:
        path.write_text(
            path.read_text() + f"\n## Update\n\nFrom now on, ticket {rng.randint(1, 10**6)} applies.\n"
        )
    return sorted(p.name for p in changed)


def run(args: argparse.Namespace, harness: Harness, result: dict[str, Any]) -> None:
    env = offline_env(harness.pgdir, workers=args.workers)
    admin_key = harness.create_org(env, "sync-bench")
    base, ready_s = harness.start_service(env)
    result["service_ready_s"] = ready_s
    kb = httpx.post(
        f"{base}/api/knowledge", json={"title": "Mirrored folder"},
        headers={"Authorization": f"Bearer {admin_key}"}, timeout=30, trust_env=False,
    )  # fmt: skip
    if kb.status_code != 201:
        raise BenchError(f"creating the knowledge base: {kb.status_code} {kb.text}")
    kb_id = kb.json()["id"]
    folder = harness.tmp / "folder"
    paths = write_folder(folder, args.files, args.seed)
    sizes = [p.stat().st_size for p in paths]
    result["folder"] = {
        "files": len(paths),
        "bytes": sum(sizes),
        "min_bytes": min(sizes),
        "max_bytes": max(sizes),
    }
    sync_env = {**os.environ, "VK_API_KEY": admin_key, "VK_URL": base, "NO_PROXY": "127.0.0.1"}
    result["first"] = sync_once(harness, sync_env, folder, kb_id, "first sync")
    result["changed_files"] = change_files(paths, args.change, args.seed + 1)
    result["resync"] = sync_once(harness, sync_env, folder, kb_id, f"re-sync, {args.change} changed")
    result["noop"] = sync_once(harness, sync_env, folder, kb_id, "re-sync, nothing changed")


def report(result: dict[str, Any]) -> None:
    if "noop" not in result:
        return
    folder = result["folder"]
    print(
        f"\n{folder['files']} files, {folder['bytes'] / 1e6:.2f} MB"
        f" ({folder['min_bytes']}-{folder['max_bytes']} bytes each)"
    )
    for name in ("first", "resync", "noop"):
        step = result[name]
        print(
            f"{name:<7} {step['wall_s']:>7} s  {step['embeddings_computed']:>6} embeddings computed"
            f"  ({step['plan']}; {step['documents_ready']} ready, {step['chunks_in_kb']} chunks)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--change", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2, help="INGESTION__WORKERS")
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--keep-tmp", action="store_true")
    args = parser.parse_args(argv)
    terminate_on_sigterm()
    started = time.perf_counter()
    harness = Harness.create("vk-sync-bench-", keep_tmp=args.keep_tmp)
    result: dict[str, Any] = {
        "started": now_iso(),
        "machine": machine_info(),
        "args": vars(args) | {"json": str(args.json)},
    }
    with reported_failure(harness, result) as outcome:
        run(args, harness, result)
    finish_report(result, started, report, args.json)
    return outcome.status


if __name__ == "__main__":
    sys.exit(main())
