"""Prometheus metrics of the service's own work (HTTP metrics come from Litestar's
Prometheus middleware). Names are prefixed ``vk_``."""

from __future__ import annotations

import os
import re
from typing import get_args

from litestar import Response, get
from litestar.plugins.prometheus import PrometheusController
from prometheus_client import Counter, Gauge, Histogram, multiprocess

from app.db.embedded import process_alive
from app.query.schemas import QueryReply, Status, Timings


class MetricsController(PrometheusController):
    """``/metrics`` in Prometheus text format, for scrapers; not part of the JSON API."""

    include_in_schema = False

    @get()
    async def get(self) -> Response:  # type: ignore[type-arg]
        folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if folder:
            forget_dead_gauges(folder)
        return await super().get.fn(self)  # type: ignore[no-any-return]


_LIVE_GAUGE_FILE = re.compile(r"gauge_live\w+?_(\d+)\.db")


def forget_dead_gauges(folder: str) -> None:
    """Drop the "live" gauges of server processes that are gone.

    A server process killed outright (out of memory, ``kill -9``) never says it is done, and
    uvicorn starts another in its place: its requests in progress and the memory its KB copies
    held stayed in the sums for good. prometheus_client leaves telling it to the application
    (``mark_process_dead``); a scrape is rare enough to look each time. Counters and
    histograms of a dead process stay, so totals never go backwards.
    """
    try:
        names = os.listdir(folder)
    except OSError:
        return  # the collector reports an unusable folder itself
    dead = {int(m.group(1)) for n in names if (m := _LIVE_GAUGE_FILE.fullmatch(n))} - {os.getpid()}
    for pid in dead:
        if not process_alive(pid):
            multiprocess.mark_process_dead(pid, folder)  # type: ignore[no-untyped-call]


_STAGE_BUCKETS = (0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)

QUERY_STAGE_MS = Histogram(
    "vk_query_stage_milliseconds",
    "query_knowledge time per stage (embed, search, llm, total), in milliseconds.",
    ["stage"],
    buckets=_STAGE_BUCKETS,
)
QUERY_OUTCOMES = Counter(
    "vk_query_outcomes_total",
    "query_knowledge outcomes: answered / not_found / unavailable, and cached / degraded.",
    ["outcome"],
)
INGESTION_JOBS = Counter(
    "vk_ingestion_jobs_total",
    "Documents processed, by outcome (ready, unchanged, failed, retry, lost).",
    ["outcome"],
)
# Every process counts the same table: with several server processes (PROMETHEUS_MULTIPROC_DIR)
# the most recent count is the answer, not the sum.
INGESTION_QUEUE = Gauge(
    "vk_ingestion_queue_documents",
    "Documents per status, as last counted.",
    ["status"],
    multiprocess_mode="mostrecent",
)
PROVIDER_ERRORS = Counter(
    "vk_provider_errors_total", "Failed calls to model providers, by kind (embedding, chat).", ["kind"]
)
RATE_LIMITED = Counter(
    "vk_rate_limited_total",
    "Requests refused by a rate limit, by budget (query, manage; query_in_flight: too many at once).",
    ["budget"],
)
SEARCH_PLANS = Counter(
    "vk_query_search_plans_total",
    "query_knowledge searches by plan: memory (KBs held in the process), exact, iterative, hnsw.",
    ["plan"],
)
TEXT_PLANS = Counter(
    "vk_query_text_plans_total",
    "query_knowledge's BM25 by where it ranked: context (the context statement), memory (the KBs'"
    " copies), sql (a statement of its own: the copies expected had changed).",
    ["plan"],
)
VECTOR_CACHE_LOADS = Counter(
    "vk_vector_cache_loads_total",
    "KB copies loaded for in-process search, by outcome: held, too_large (for QUERY__VECTOR_CACHE_MB), "
    "no_room (every KB held in use), failed.",
    ["outcome"],
)
VECTOR_CACHE_EVICTIONS = Counter(
    "vk_vector_cache_evictions_total", "KB copies dropped to make room for another (least recently used)."
)
VECTOR_CACHE_BYTES = Gauge(
    "vk_vector_cache_bytes",
    "Memory held by copies of KBs for in-process search (QUERY__VECTOR_CACHE_MB).",
    multiprocess_mode="livesum",
)

# The query series exist from the start, at zero, as Prometheus advises for known label
# values: dashboards and alerts over them work before the first call, and rate() sees the
# first one. (A labelled series is otherwise exported only once it has been touched.)
for _stage in Timings.model_fields:
    QUERY_STAGE_MS.labels(_stage)
for _outcome in (*get_args(Status), "cached", "degraded"):
    QUERY_OUTCOMES.labels(_outcome)
for _plan in ("memory", "exact", "iterative", "hnsw"):
    SEARCH_PLANS.labels(_plan)
for _plan in ("context", "memory", "sql"):
    TEXT_PLANS.labels(_plan)
for _outcome in ("held", "too_large", "no_room", "failed"):
    VECTOR_CACHE_LOADS.labels(_outcome)


def observe_query(response: QueryReply) -> None:
    for stage, value in response.timings_ms.items():
        QUERY_STAGE_MS.labels(stage).observe(value)
    QUERY_OUTCOMES.labels(response.status).inc()
    if response.cached:
        QUERY_OUTCOMES.labels("cached").inc()
    if response.degraded:
        QUERY_OUTCOMES.labels("degraded").inc()
