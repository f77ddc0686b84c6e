"""What the webhook trigger (migration 0013) costs a document status change.

Every status change of a document runs ``enqueue_webhook_event``: an indexed look-up of the
organisation's endpoints and, when one is subscribed, an event and a delivery row. This
measures it two ways, on a fresh embedded PostgreSQL migrated to head, with no endpoint and
with one subscribed endpoint:

- the trigger's own time per row, as ``EXPLAIN ANALYZE`` reports it for one statement that
  changes the status of every document (the server's work alone: stable on a busy machine);
- single-row status updates, each its own transaction (the worker's statement shape), also
  with the trigger disabled: wall time per update, commit included.

    .venv/bin/python -m bench.webhook_trigger --updates 3000

It starts its own embedded PostgreSQL in a temporary folder and removes it at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid

import asyncpg

from app.db.migrate import upgrade
from bench.harness import Harness, postgres_url

UPDATE = "UPDATE documents SET status = $2, updated_at = now() WHERE id = $1"
STATUSES = ("processing", "ready", "pending")
DOCUMENTS = 500


async def _seed(conn: asyncpg.Connection, documents: int) -> tuple[uuid.UUID, list[uuid.UUID]]:
    org = uuid.uuid4()
    kb = uuid.uuid4()
    await conn.execute("INSERT INTO organisations (id, name) VALUES ($1, 'bench')", org)
    await conn.execute(
        "INSERT INTO knowledge_bases (id, org_id, title, language, chunk_tokens, chunk_overlap_tokens)"
        " VALUES ($1, $2, 'kb', 'english', 500, 60)",
        kb,
        org,
    )
    ids = [uuid.uuid4() for _ in range(documents)]
    await conn.executemany(
        "INSERT INTO documents (id, org_id, kb_id, title, source_kind) VALUES ($1, $2, $3, 'd', 'text')",
        [(i, org, kb) for i in ids],
    )
    return org, ids


async def _time_updates(conn: asyncpg.Connection, ids: list[uuid.UUID], updates: int) -> list[float]:
    timings = []
    for n in range(updates):
        started = time.perf_counter()
        await conn.execute(UPDATE, ids[n % len(ids)], STATUSES[(n // len(ids)) % 3])
        timings.append((time.perf_counter() - started) * 1e6)
    return timings


async def _trigger_us_per_row(conn: asyncpg.Connection, documents: int) -> float:
    """The trigger's time per changed row, from EXPLAIN ANALYZE; the change is rolled back."""
    transaction = conn.transaction()
    await transaction.start()
    try:
        plan = await conn.fetchval(
            "EXPLAIN (ANALYZE, FORMAT JSON) UPDATE documents SET status = CASE status"
            " WHEN 'pending' THEN 'processing' ELSE 'pending' END"
        )
    finally:
        await transaction.rollback()
    triggers = json.loads(plan)[0]["Triggers"]
    timing = next(t for t in triggers if t["Trigger Name"] == "documents_status_webhook")
    assert timing["Calls"] == documents
    return float(timing["Time"]) * 1000 / documents


async def _run(harness: Harness, updates: int) -> None:
    url = postgres_url(harness.pgdir)
    await asyncio.to_thread(upgrade, url)
    conn = await asyncpg.connect(url)
    try:
        org, ids = await _seed(conn, DOCUMENTS)
        await _time_updates(conn, ids, DOCUMENTS)  # warm the caches and plans
        per_row = {"no endpoint": await _trigger_us_per_row(conn, DOCUMENTS)}
        cases = {}
        await conn.execute("ALTER TABLE documents DISABLE TRIGGER documents_status_webhook")
        cases["trigger disabled"] = await _time_updates(conn, ids, updates)
        await conn.execute("ALTER TABLE documents ENABLE TRIGGER documents_status_webhook")
        cases["trigger, no endpoint"] = await _time_updates(conn, ids, updates)
        await conn.execute(
            "INSERT INTO webhook_endpoints (id, org_id, url, events, secret)"
            " VALUES ($1, $2, 'https://hooks.example.com/', '{*}', 'whsec_x')",
            uuid.uuid4(),
            org,
        )
        per_row["one endpoint"] = await _trigger_us_per_row(conn, DOCUMENTS)
        cases["trigger, one endpoint"] = await _time_updates(conn, ids, updates)
        events = await conn.fetchval("SELECT count(*) FROM webhook_events")
    finally:
        await conn.close()
    for name, value in per_row.items():
        print(f"trigger time per row, {name:12} {value:7.1f} us (EXPLAIN ANALYZE, {DOCUMENTS} rows)")
    for name, timings in cases.items():
        quantiles = statistics.quantiles(timings, n=100)
        print(
            f"{name:24} p50 {statistics.median(timings):7.1f} us  p99 {quantiles[98]:7.1f} us"
            f"  mean {statistics.fmean(timings):7.1f} us"
        )
    print(f"events written with the endpoint: {events}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=3000)
    args = parser.parse_args()

    harness = Harness.create("vk-pg-webhooks-")
    try:
        asyncio.run(_run(harness, args.updates))
    finally:
        harness.close()


if __name__ == "__main__":
    main()
