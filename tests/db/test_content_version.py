"""Every write that changes what a call reads of a knowledge base moves its content version
and change time, and keeps its chunk count exact: triggers do it (migration 0009), so the
in-memory copies and the answer cache cannot outlive a change, whoever made it.

The app's write paths are driven through the API and the ingestion worker; the raw-SQL
tests play a writer that knows nothing of the rule."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from tests.helpers import create_kb, create_text_doc

THREE_SECTIONS = """## Opening hours
We are open Monday to Friday from nine to five.

## Refunds
Refunds are paid within 14 days to the original card.

## Parking
Visitors park behind the building, level two.
"""

TWO_SECTIONS = """## Opening hours
We are open Monday to Saturday from eight to six.

## Parking
Visitors park in the street.
"""


@dataclass(frozen=True)
class KBState:
    version: int
    chunk_count: int
    real_count: int
    changed: dt.datetime


async def _state(engine: AsyncEngine, kb_id: str) -> KBState:
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                text(
                    "SELECT content_version, chunk_count, coalesce(updated_at, created_at) AS changed,"
                    " (SELECT count(*) FROM chunks WHERE kb_id = kb.id) AS real_count"
                    " FROM knowledge_bases kb WHERE id = :k"
                ),
                {"k": uuid.UUID(kb_id)},
            )
        ).one()
    return KBState(row.content_version, row.chunk_count, row.real_count, row.changed)


def _bumped(before: KBState, after: KBState, chunks: int) -> None:
    """One new version, a later change time, and the count of the chunks really there."""
    assert (after.version, after.chunk_count, after.real_count) == (before.version + 1, chunks, chunks)
    assert after.changed > before.changed


async def _ready_doc(client: Any, org: Any, drain_queue: Any, kb_id: str, content: str, title: str) -> str:
    doc = await create_text_doc(
        client, org.headers, kb_id, content=content, content_type="markdown", title=title
    )
    assert await drain_queue() == {"ready": 1}
    return str(doc["id"])


# Through the app.


async def test_indexing_a_document(client, org, drain_queue, engine):
    kb = await create_kb(client, org.headers)
    await create_text_doc(client, org.headers, kb["id"], content=THREE_SECTIONS, content_type="markdown")
    before = await _state(engine, kb["id"])
    assert await drain_queue() == {"ready": 1}
    _bumped(before, await _state(engine, kb["id"]), 3)


async def test_reindexing_a_document_swaps_its_chunks_in_one_version(client, org, drain_queue, engine):
    kb = await create_kb(client, org.headers)
    doc_id = await _ready_doc(client, org, drain_queue, kb["id"], THREE_SECTIONS, "Handbook")
    before = await _state(engine, kb["id"])
    r = await client.put(
        f"/api/knowledge/{kb['id']}/documents/{doc_id}",
        json={"content": TWO_SECTIONS, "content_type": "markdown"},
        headers=org.headers,
    )
    assert r.status_code == 200
    # Queued, not yet indexed: the old chunks still answer, at their version.
    assert await _state(engine, kb["id"]) == before
    assert await drain_queue() == {"ready": 1}
    _bumped(before, await _state(engine, kb["id"]), 2)


async def test_deleting_a_document(client, org, drain_queue, engine):
    kb = await create_kb(client, org.headers)
    doc_id = await _ready_doc(client, org, drain_queue, kb["id"], THREE_SECTIONS, "Handbook")
    await _ready_doc(client, org, drain_queue, kb["id"], TWO_SECTIONS, "Summer")
    before = await _state(engine, kb["id"])
    r = await client.delete(f"/api/knowledge/{kb['id']}/documents/{doc_id}", headers=org.headers)
    assert r.status_code == 204
    _bumped(before, await _state(engine, kb["id"]), 2)


async def test_deleting_a_document_not_yet_indexed(client, org, drain_queue, engine):
    kb = await create_kb(client, org.headers)
    await _ready_doc(client, org, drain_queue, kb["id"], THREE_SECTIONS, "Handbook")
    pending = await create_text_doc(client, org.headers, kb["id"])
    before = await _state(engine, kb["id"])
    r = await client.delete(f"/api/knowledge/{kb['id']}/documents/{pending['id']}", headers=org.headers)
    assert r.status_code == 204
    _bumped(before, await _state(engine, kb["id"]), 3)


async def test_renaming_a_document(client, org, drain_queue, engine):
    kb = await create_kb(client, org.headers)
    doc_id = await _ready_doc(client, org, drain_queue, kb["id"], THREE_SECTIONS, "Handbook")
    path = f"/api/knowledge/{kb['id']}/documents/{doc_id}"
    before = await _state(engine, kb["id"])
    r = await client.put(path, json={"title": "Visitor handbook"}, headers=org.headers)
    assert r.status_code == 200
    renamed = await _state(engine, kb["id"])
    _bumped(before, renamed, 3)
    # The same title again, or a new description, changes nothing a call reads.
    r = await client.put(
        path, json={"title": "Visitor handbook", "description": "For visitors"}, headers=org.headers
    )
    assert r.status_code == 200
    assert await _state(engine, kb["id"]) == renamed


# A writer that knows nothing of content versions.

INSERT_CHUNKS = """
INSERT INTO chunks (org_id, kb_id, document_id, ordinal, text, token_count, embedding_model, embedding_dim,
                    embedding, tsv)
SELECT d.org_id, d.kb_id, d.id, 100 + i, 'Added by hand ' || i, 3, 'by-hand:3', 3, '[1,0,0]',
       to_tsvector('english', 'Added by hand')
FROM documents d, generate_series(1, :n) AS i
WHERE d.id = :d
"""


async def _sql(engine: AsyncEngine, *statements: tuple[str, dict[str, Any]]) -> None:
    """The statements in one transaction."""
    async with engine.begin() as conn:
        for statement, params in statements:
            await conn.execute(text(statement), params)


async def _two_kbs(client: Any, org: Any, drain_queue: Any) -> tuple[str, str, str, str]:
    kb = await create_kb(client, org.headers)
    other = await create_kb(client, org.headers, "Other")
    doc_id = await _ready_doc(client, org, drain_queue, kb["id"], THREE_SECTIONS, "Handbook")
    other_doc = await _ready_doc(client, org, drain_queue, other["id"], TWO_SECTIONS, "Summer")
    return kb["id"], doc_id, other["id"], other_doc


async def test_raw_chunk_inserts_and_deletes(client, org, drain_queue, engine):
    kb_id, doc_id, _, _ = await _two_kbs(client, org, drain_queue)
    before = await _state(engine, kb_id)
    await _sql(engine, (INSERT_CHUNKS, {"n": 4, "d": uuid.UUID(doc_id)}))
    inserted = await _state(engine, kb_id)
    _bumped(before, inserted, 7)
    await _sql(
        engine, ("DELETE FROM chunks WHERE document_id = :d AND ordinal >= 100", {"d": uuid.UUID(doc_id)})
    )
    _bumped(inserted, await _state(engine, kb_id), 3)


async def test_raw_chunk_updates_and_moves(client, org, drain_queue, engine):
    kb_id, doc_id, other_id, _ = await _two_kbs(client, org, drain_queue)
    before, other_before = await _state(engine, kb_id), await _state(engine, other_id)
    await _sql(
        engine, ("UPDATE chunks SET text = upper(text) WHERE document_id = :d", {"d": uuid.UUID(doc_id)})
    )
    edited = await _state(engine, kb_id)
    _bumped(before, edited, 3)
    assert await _state(engine, other_id) == other_before
    await _sql(
        engine,
        (
            "UPDATE chunks SET kb_id = :o WHERE id = (SELECT min(id) FROM chunks WHERE document_id = :d)",
            {"o": uuid.UUID(other_id), "d": uuid.UUID(doc_id)},
        ),
    )
    _bumped(edited, await _state(engine, kb_id), 2)
    _bumped(other_before, await _state(engine, other_id), 3)


async def test_raw_truncate(client, org, drain_queue, engine):
    kb_id, _, other_id, _ = await _two_kbs(client, org, drain_queue)
    empty = await create_kb(client, org.headers, "Empty")
    before, other_before, empty_before = (
        await _state(engine, kb_id),
        await _state(engine, other_id),
        await _state(engine, empty["id"]),
    )
    await _sql(engine, ("TRUNCATE chunks", {}))
    _bumped(before, await _state(engine, kb_id), 0)
    _bumped(other_before, await _state(engine, other_id), 0)
    # No chunks before, none after: nothing a call reads changed.
    assert await _state(engine, empty["id"]) == empty_before


async def test_raw_document_title_and_kb_language(client, org, drain_queue, engine):
    kb_id, doc_id, _, _ = await _two_kbs(client, org, drain_queue)
    before = await _state(engine, kb_id)
    await _sql(
        engine, ("UPDATE documents SET title = 'Renamed by hand' WHERE id = :d", {"d": uuid.UUID(doc_id)})
    )
    renamed = await _state(engine, kb_id)
    _bumped(before, renamed, 3)
    await _sql(
        engine, ("UPDATE knowledge_bases SET language = 'french' WHERE id = :k", {"k": uuid.UUID(kb_id)})
    )
    french = await _state(engine, kb_id)
    _bumped(renamed, french, 3)
    await _sql(
        engine, ("UPDATE knowledge_bases SET language = 'french' WHERE id = :k", {"k": uuid.UUID(kb_id)})
    )
    assert await _state(engine, kb_id) == french


async def test_one_transaction_is_one_version(client, org, drain_queue, engine):
    kb_id, doc_id, _, _ = await _two_kbs(client, org, drain_queue)
    before = await _state(engine, kb_id)
    doc = {"d": uuid.UUID(doc_id)}
    await _sql(
        engine,
        ("DELETE FROM chunks WHERE document_id = :d AND ordinal = 0", doc),
        (INSERT_CHUNKS, {"n": 2, **doc}),
        ("UPDATE documents SET title = 'Renamed by hand' WHERE id = :d", doc),
    )
    _bumped(before, await _state(engine, kb_id), 4)


async def test_a_rolled_back_savepoint_takes_its_bump_back(client, org, drain_queue, engine):
    kb_id, doc_id, _, _ = await _two_kbs(client, org, drain_queue)
    before = await _state(engine, kb_id)
    async with engine.begin() as conn:
        await _rolled_back_insert(conn, doc_id)
    assert await _state(engine, kb_id) == before
    # A later statement of the same transaction still bumps.
    async with engine.begin() as conn:
        await _rolled_back_insert(conn, doc_id)
        await conn.execute(text(INSERT_CHUNKS), {"n": 1, "d": uuid.UUID(doc_id)})
    _bumped(before, await _state(engine, kb_id), 4)


async def _rolled_back_insert(conn: AsyncConnection, doc_id: str) -> None:
    savepoint = await conn.begin_nested()
    await conn.execute(text(INSERT_CHUNKS), {"n": 2, "d": uuid.UUID(doc_id)})
    await savepoint.rollback()
