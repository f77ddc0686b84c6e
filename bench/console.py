"""Console page rendering: how long the server takes to answer the main pages of a knowledge
base with 1,000 documents, for a signed-in browser session.

What it does, in order:

1. starts the OpenAI-compatible stub, ``vk create-org`` on a fresh embedded PostgreSQL, and
   seeds it by SQL (``bench.seed``): one knowledge base of ``--docs`` ready documents of
   ``--chunks-per-doc`` chunks each, one agent; then ``vk serve`` (no ingestion workers, rate
   limits off);
2. asks the agent ``--queries`` distinct questions through ``query_knowledge`` with a query
   key, so the query log has entries to list;
3. signs in to the console with the admin key, as a browser does (the sign-in form's token,
   then the session cookie);
4. requests each page below once per round for ``--rounds`` rounds (after ``--warmup`` rounds),
   the pages interleaved so that a change in the machine's load touches them all alike, each
   answer checked (200, HTML, not the sign-in page); one client, keep-alive, over loopback;
5. prints p50/p95 per page in milliseconds (the whole request as the client sees it: routing,
   session check, SQL and template rendering), with the machine's load during the run.

Run from the repository root::

    uv run --frozen --no-sync python -m bench.console
    uv run --frozen --no-sync python -m bench.console --rounds 200 --json /tmp/console.json
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.harness import BenchError, Harness, create_query_key, reported_failure, terminate_on_sigterm
from bench.metering import CpuMeter, machine_info, speed_probe
from bench.report import finish_report, now_iso, percentiles
from bench.seed import QuestionMaker, SeedConfig, SeedResult, seeded_service

TARGET_P50_MS = 50.0
_SIGN_IN_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass(frozen=True)
class ConsolePage:
    name: str
    path: str


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1000, help="documents in the knowledge base")
    parser.add_argument("--chunks-per-doc", type=int, default=5)
    parser.add_argument("--queries", type=int, default=200, help="query_knowledge calls for the query log")
    parser.add_argument("--rounds", type=int, default=100, help="measured requests per page")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured rounds first")
    parser.add_argument("--dims", type=int, default=512)
    parser.add_argument("--seed", type=int, default=20250101)
    parser.add_argument("--keep-tmp", action="store_true", help="keep the database and logs")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    terminate_on_sigterm()
    started = time.perf_counter()
    result: dict[str, Any] = {
        "benchmark": "console pages, server side",
        "date": now_iso(),
        "command": " ".join(["python -m bench.console", *sys.argv[1:]]),
        "machine": machine_info(),
        "settings": {
            "docs": args.docs,
            "chunks_per_doc": args.chunks_per_doc,
            "queries": args.queries,
            "rounds": args.rounds,
            "warmup": args.warmup,
        },
    }
    harness = Harness.create("vk-console-bench-", keep_tmp=args.keep_tmp)
    with reported_failure(harness, result):
        harness.start_stub(dims=args.dims)
        cfg = SeedConfig(
            kbs=1,
            docs_per_kb=args.docs,
            chunks_per_kb=args.docs * args.chunks_per_doc,
            dims=args.dims,
            seed=args.seed,
        )
        seed, base, admin_key = seeded_service(harness, cfg, name="console-bench")
        result["seed"] = seed.summary()
        asyncio.run(fill_query_log(base, admin_key, seed, QuestionMaker.of(seed, args.seed), args.queries))
        result["speed_probe_ms"] = speed_probe()
        meter = CpuMeter(harness.pids()).start()
        result["pages"] = measure(base, admin_key, seed, args)
        result["load"] = meter.stop()
    finish_report(result, started, print_report, args.json)
    return 2 if "error" in result else 0


async def fill_query_log(
    base: str, admin_key: str, seed: SeedResult, questions: QuestionMaker, count: int
) -> None:
    # The seed writes assignments only; the API's assignment also makes the agent known to
    # the organisation, which the query log asks for.
    async with httpx.AsyncClient(base_url=base, timeout=30.0, trust_env=False) as client:
        r = await client.put(
            f"/api/knowledge/{seed.kb_ids[0]}/agents",
            json={"agent_ids": seed.agent_ids[:1]},
            headers={"Authorization": f"Bearer {admin_key}"},
        )
        if r.status_code != 200:
            raise BenchError(f"assigning the agent answered {r.status_code}: {r.text[:300]}")
    query_key = await create_query_key(base, admin_key)
    headers = {"Authorization": f"Bearer {query_key}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30.0, trust_env=False) as client:
        for agent, question in questions.many(count):
            r = await client.post(f"/api/agents/{agent}/query_knowledge", json={"query": question})
            if r.status_code != 200:
                raise BenchError(f"query_knowledge answered {r.status_code}: {r.text[:300]}")


def sign_in(client: httpx.Client, admin_key: str) -> None:
    form = client.get("/console/sign-in")
    token = _SIGN_IN_TOKEN.search(form.text)
    if form.status_code != 200 or token is None:
        raise BenchError(f"the sign-in form answered {form.status_code}: {form.text[:300]}")
    r = client.post(
        "/console/sign-in",
        data={"csrf_token": token.group(1), "next": "/console/knowledge", "api_key": admin_key},
    )
    if r.status_code != 303 or "vk_console" not in client.cookies:
        raise BenchError(f"signing in answered {r.status_code}: {r.text[:300]}")


def pages_of(client: httpx.Client, kb_id: str, agent_id: str) -> list[ConsolePage]:
    """The main pages, with ids and page numbers read from the console itself."""
    documents = get_page(client, f"/console/knowledge/{kb_id}")
    document_link = rf'href="(/console/knowledge/{kb_id}/documents/[0-9a-f-]{{36}})"'
    links = sorted(set(re.findall(document_link, documents)))
    if not links:
        raise BenchError("the documents page links no document")
    pages = re.search(r"Page 1 of (\d+)", documents)
    if pages is None:
        raise BenchError("the documents page shows no page count")
    later = max(2, int(pages.group(1)) // 2)  # the middle of the list: OFFSET is not free
    return [
        ConsolePage("knowledge bases", "/console/knowledge"),
        ConsolePage("documents, page 1", f"/console/knowledge/{kb_id}"),
        ConsolePage(f"documents, page {later}", f"/console/knowledge/{kb_id}?page={later}"),
        ConsolePage("document and chunks", links[0]),
        ConsolePage("query log", f"/console/query-log?agent_id={agent_id}"),
    ]


def get_page(client: httpx.Client, path: str) -> str:
    r = client.get(path)
    if r.status_code != 200 or not r.headers.get("content-type", "").startswith("text/html"):
        raise BenchError(f"{path} answered {r.status_code} {r.headers.get('content-type')}: {r.text[:300]}")
    if 'action="/console/sign-in"' in r.text:
        raise BenchError(f"{path} showed the sign-in form: the session was lost")
    return r.text


def measure(base: str, admin_key: str, seed: SeedResult, args: argparse.Namespace) -> dict[str, Any]:
    with httpx.Client(base_url=base, timeout=30.0, trust_env=False) as client:
        sign_in(client, admin_key)
        pages = pages_of(client, seed.kb_ids[0], seed.agent_ids[0])
        spent: dict[str, list[float]] = {page.name: [] for page in pages}
        sizes: dict[str, int] = {}
        for round_ in range(args.warmup + args.rounds):
            for page in pages:
                t = time.perf_counter()
                html = get_page(client, page.path)
                elapsed_ms = (time.perf_counter() - t) * 1000
                if round_ >= args.warmup:
                    spent[page.name].append(elapsed_ms)
                sizes[page.name] = len(html)
    return {
        page.name: {
            "path": page.path,
            "bytes": sizes[page.name],
            **percentiles(spent[page.name], (0.5, 0.95)),
        }
        for page in pages
    }


def print_report(result: dict[str, Any]) -> None:
    machine = result["machine"]
    print(f"\n{result['benchmark']}: {machine['nproc']} cores, {machine['cpu_model']}, {result['date']}")
    if "pages" not in result:
        print(f"no figures: {result.get('error')}")
        return
    settings = result["settings"]
    print(
        f"{settings['docs']} documents x {settings['chunks_per_doc']} chunks, {settings['queries']} "
        f"query-log entries, {settings['rounds']} requests per page"
    )
    print(f"{'page':<24} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'KB':>6}")
    for name, figures in result["pages"].items():
        print(
            f"{name:<24} {figures['p50']:8.1f} {figures['p95']:8.1f} {figures['max']:8.1f} "
            f"{figures['bytes'] / 1000:6.1f}"
        )
    slow = [name for name, figures in result["pages"].items() if figures["p50"] > TARGET_P50_MS]
    print(f"target p50 <= {TARGET_P50_MS:g} ms: {'missed by ' + ', '.join(slow) if slow else 'met'}")
    load = result["load"]
    print(
        f"load: foreign cores {load['foreign_cores']}, loadavg max {load['loadavg_max_1m']}, "
        f"speed probe {result['speed_probe_ms']} ms"
    )


if __name__ == "__main__":
    sys.exit(main())
