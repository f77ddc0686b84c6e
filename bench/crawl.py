"""Crawl benchmark: a 200-page site on loopback, crawled by ``vk serve`` (embedded PostgreSQL,
the offline default embedder, the worker process), then crawled again unchanged.

The site is served by this process (stdlib ``ThreadingHTTPServer``): every page has a title,
a few paragraphs and links to other pages, ``/sitemap.xml`` lists them all, ``/robots.txt``
names the sitemap, and every answer carries an ETag honoured by ``If-None-Match`` (304).
Only this benchmark opens loopback to the fetcher (INGESTION__ALLOWED_NETWORKS=127.0.0.1/32
and the site's port in INGESTION__ALLOWED_HOSTS) and drops the politeness pause
(CRAWL__DELAY_S=0).

Measured: the first crawl until every page is a ready document; the re-crawl until it
completes, with the site's 200 and 304 answers counted, and whether anything was indexed
again (documents re-queued, ``indexed_at`` moved, embedding cache rows added: each must be 0)::

    .venv/bin/python -m bench.crawl --pages 200 --json /tmp/crawl.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from bench.harness import BenchError, Harness, offline_env, terminate_on_sigterm
from bench.isolation import progress
from bench.metering import machine_info
from bench.report import now_iso
from bench.seed import TextMaker

LINKS_PER_PAGE = 5


def build_site(pages: int, seed: int = 7) -> dict[str, bytes]:
    """Path -> body. Page i links to the next pages and a few spread across the site, so a
    link walk alone also reaches every page."""
    maker = TextMaker(0, seed)
    site: dict[str, bytes] = {}
    for i in range(pages):
        title = maker.title(i)
        paragraphs = "".join(f"<p>{' '.join(maker.sentence() for _ in range(4))}</p>" for _ in range(4))
        targets = sorted(
            {(i + 1) % pages, (i * 7 + 3) % pages, (i * 13 + 5) % pages, (i + pages // 2) % pages}
        )
        links = "".join(
            f'<li><a href="{page_path(t)}">{maker.title(t)}</a></li>' for t in targets[:LINKS_PER_PAGE]
        )
        body = (
            f"<html><head><title>{title}</title></head><body><nav><ul>{links}</ul></nav>"
            f"<main><h1>{title}</h1>{paragraphs}</main></body></html>"
        )
        site[page_path(i)] = body.encode()
    return site


def page_path(index: int) -> str:
    return "/" if index == 0 else f"/page/{index}"


class Site:
    """The test site on 127.0.0.1, counting its answers by status."""

    def __init__(self, pages: int) -> None:
        self.pages = build_site(pages)
        self.counts: Counter[int] = Counter()
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.port = self.server.server_address[1]
        base = f"http://127.0.0.1:{self.port}"
        locs = "".join(f"<url><loc>{base}{path}</loc></url>" for path in self.pages)
        self.pages["/sitemap.xml"] = (
            f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'
        ).encode()
        self.pages["/robots.txt"] = f"User-agent: *\nAllow: /\nSitemap: {base}/sitemap.xml\n".encode()
        self.thread = threading.Thread(target=self.server.serve_forever, name="crawl-site", daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = site.pages.get(self.path)
                if body is None:
                    self._answer(404, b"not found", "text/plain")
                    return
                etag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
                if self.headers.get("If-None-Match") == etag:
                    self._answer(304, b"", None, etag)
                    return
                kind = {"/sitemap.xml": "application/xml", "/robots.txt": "text/plain"}.get(
                    self.path, "text/html"
                )
                self._answer(200, body, f"{kind}; charset=utf-8", etag)

            def _answer(self, status: int, body: bytes, kind: str | None, etag: str | None = None) -> None:
                with site.lock:
                    site.counts[status] += 1
                self.send_response(status)
                if kind:
                    self.send_header("Content-Type", kind)
                if etag:
                    self.send_header("ETag", etag)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler

    def start(self) -> Site:
        self.thread.start()
        return self

    def take_counts(self) -> dict[int, int]:
        with self.lock:
            counts = dict(self.counts)
            self.counts.clear()
        return counts

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def index_state(harness: Harness, kb_id: str) -> dict[str, Any]:
    return harness.fetchrow(
        """
        SELECT count(*) FILTER (WHERE status <> 'ready') AS not_ready,
               max(indexed_at) AS last_indexed,
               (SELECT count(*) FROM embedding_cache) AS cached_vectors
        FROM documents WHERE kb_id = $1::uuid
        """,
        kb_id,
    )


def wait_for_crawl(http: httpx.Client, path: str, after: str | None, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        crawl: dict[str, Any] = http.get(path).json()
        if crawl["status"] in ("completed", "failed", "cancelled") and crawl["finished_at"] != after:
            return crawl
        time.sleep(0.2)
    raise BenchError(f"the crawl did not finish within {timeout_s:g} s")


def wait_for_ready(harness: Harness, kb_id: str, pages: int, timeout_s: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = progress(harness, kb_id)
        if state["ready"] + state["failed"] >= pages:
            return state
        time.sleep(0.25)
    raise BenchError(f"the pages were not all indexed within {timeout_s:g} s")


def run(harness: Harness, site: Site, args: argparse.Namespace) -> dict[str, Any]:
    env = offline_env(harness.pgdir, workers=args.workers)
    env.update(
        {
            "INGESTION__ALLOWED_HOSTS": f"127.0.0.1:{site.port}",
            "INGESTION__ALLOWED_NETWORKS": "127.0.0.1/32",
            "CRAWL__DELAY_S": "0",
            "CRAWL__POLL_INTERVAL_S": "0.5",
        }
    )
    admin_key = harness.create_org(env, "crawl")
    base, ready_s = harness.start_service(env)
    headers = {"Authorization": f"Bearer {admin_key}"}
    with httpx.Client(base_url=base, timeout=60.0, trust_env=False, headers=headers) as http:
        kb = http.post("/api/knowledge", json={"title": "Crawled site"}).json()
        start = f"http://127.0.0.1:{site.port}/"
        site.take_counts()
        started = time.perf_counter()
        r = http.post(
            f"/api/knowledge/{kb['id']}/crawls", json={"url": start, "max_pages": args.pages, "max_depth": 5}
        )
        if r.status_code != 202:
            raise BenchError(f"the crawl was refused: {r.status_code} {r.text}")
        path = f"/api/knowledge/{kb['id']}/crawls/{r.json()['id']}"
        first = wait_for_crawl(http, path, None, args.timeout_s)
        crawled_s = time.perf_counter() - started
        indexed = wait_for_ready(harness, kb["id"], args.pages, args.timeout_s)
        ready_all_s = time.perf_counter() - started
        first_answers = site.take_counts()
        before = index_state(harness, kb["id"])

        started = time.perf_counter()
        if http.post(f"{path}/run").status_code != 202:
            raise BenchError("the re-crawl was refused")
        second = wait_for_crawl(http, path, first["finished_at"], args.timeout_s)
        recrawl_s = time.perf_counter() - started
        # Anything re-queued would be taken by the worker within a poll or two.
        time.sleep(3.0)
        after = index_state(harness, kb["id"])
        second_answers = site.take_counts()
    return {
        "service_ready_s": ready_s,
        "first": {
            "status": first["status"],
            "progress": first["progress"],
            "crawl_s": round(crawled_s, 2),
            "all_ready_s": round(ready_all_s, 2),
            "documents": indexed,
            "site_answers": first_answers,
        },
        "recrawl": {
            "status": second["status"],
            "progress": second["progress"],
            "crawl_s": round(recrawl_s, 2),
            "site_answers": second_answers,
            "documents_requeued": after["not_ready"],
            "reindexed": after["last_indexed"] != before["last_indexed"],
            "embedding_cache_rows_added": after["cached_vectors"] - before["cached_vectors"],
        },
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=200, help="pages on the test site")
    parser.add_argument("--workers", type=int, default=2, help="INGESTION__WORKERS of the service")
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--keep-tmp", action="store_true")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    terminate_on_sigterm()
    harness = Harness.create("vk-crawl-", keep_tmp=args.keep_tmp)
    site = Site(args.pages).start()
    started = now_iso()
    try:
        result = run(harness, site, args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        print(harness.service_log()[-3000:], file=sys.stderr)
        return 1
    finally:
        site.stop()
        harness.close()
    report = {"started": started, "machine": machine_info(), "args": vars(args), **result}
    print(json.dumps(report, indent=1, default=str))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
