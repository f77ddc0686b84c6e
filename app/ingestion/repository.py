"""SQL of the ingestion queue. The documents table is the queue: a worker takes a
document by setting a lease (owner + expiry) with ``FOR UPDATE SKIP LOCKED``, renews it
while it works, and every write that finishes a job is fenced by that lease, so a worker
that lost its lease (it stalled and another took over) cannot write stale chunks.

These statements run on raw asyncpg connections: they are few, hot, and explicit.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Organisations take turns: each one's documents are numbered in its own queue, after those
# it already has in work, and the lowest numbers go first, so one organisation's backlog of
# thousands does not hold back another's single upload (oldest first between equal turns).
# An upgrade's backlog of re-reads waits behind new work. FOR UPDATE cannot share a query
# level with a window function: the turns are numbered in one step and the rows locked in
# the next, where the claim's condition is checked again under the lock. Only the head of
# the queue is locked from; when other claims hold enough of a full head at this instant,
# the rest is taken first come, first served (``more``), so a claim never stalls. A head
# shorter than its limit held the whole queue, and then nothing is scanned twice.
_CLAIMABLE = """(
    (d.status = 'pending' AND (d.lease_expires_at IS NULL OR d.lease_expires_at < now()))
    OR (d.status = 'processing' AND d.lease_expires_at < now() AND d.attempts < $3)
)"""
CLAIM_SQL = f"""
WITH in_work AS (
    SELECT org_id, count(*) AS n FROM documents
    WHERE status = 'processing' AND lease_expires_at >= now()
    GROUP BY org_id
), queued AS (
    SELECT d.id, d.reread, d.created_at,
           coalesce(w.n, 0)
           + row_number() OVER (PARTITION BY d.org_id, d.reread ORDER BY d.created_at) AS turn
    FROM documents d LEFT JOIN in_work w ON w.org_id = d.org_id
    WHERE {_CLAIMABLE}
), head AS (
    SELECT id, reread, turn, created_at FROM queued ORDER BY reread, turn, created_at LIMIT $4 + 32
), fair AS (
    SELECT d.id FROM documents d JOIN head q ON q.id = d.id
    WHERE {_CLAIMABLE}
    ORDER BY q.reread, q.turn, q.created_at
    FOR UPDATE OF d SKIP LOCKED
    LIMIT $4
), more AS (
    SELECT d.id FROM documents d
    WHERE (SELECT count(*) FROM head) = $4 + 32
      AND (SELECT count(*) FROM fair) < $4
      AND d.id NOT IN (SELECT id FROM fair)
      AND {_CLAIMABLE}
    ORDER BY d.reread, d.created_at
    FOR UPDATE SKIP LOCKED
    LIMIT $4
), picked AS (
    -- read in order and lazily: ``more`` is read, and locks, only for what ``fair`` left
    SELECT id FROM fair UNION ALL SELECT id FROM more LIMIT $4
)
UPDATE documents d
SET status = 'processing', attempts = d.attempts + 1, lease_owner = $1,
    lease_expires_at = now() + make_interval(secs => $2), progress_done = 0, progress_total = 0,
    updated_at = now()
FROM picked, knowledge_bases kb
WHERE d.id = picked.id AND kb.id = d.kb_id
RETURNING d.id, d.lease_owner AS lease, d.org_id, d.kb_id, d.title, d.source_kind, d.source_url,
          d.file_name, d.original, d.content_hash, d.chunk_count, d.attempts, d.etag, d.last_modified,
          d.sync_interval_s, d.status, d.reread, d.fetched_kind, d.fetched_charset,
          kb.language, kb.chunk_tokens, kb.chunk_overlap_tokens
"""

# A job whose worker died more often than allowed is not retried forever.
GIVE_UP_SQL = """
UPDATE documents
SET status = 'failed', lease_owner = NULL, lease_expires_at = NULL, updated_at = now(),
    error = 'processing was interrupted ' || attempts || ' times; giving up (re-upload or edit to retry)',
    reread = false, extraction_version = $2, embedding_model = $3
WHERE status = 'processing' AND lease_expires_at < now() AND attempts >= $1
"""

# URL documents whose re-sync interval has passed go back in the queue.
DUE_SYNC_SQL = """
UPDATE documents
SET status = 'pending', reread = false, attempts = 0, lease_expires_at = NULL, updated_at = now()
WHERE next_sync_at <= now() AND status IN ('ready', 'failed') AND source_kind = 'url'
"""

# Documents to read again, once: those an older extractor read (only older: during a rolling
# upgrade the old workers leave the new ones' alone), and those with chunks of another
# embedding model, which are never searched. A failure records the version and model too, so
# a document that fails keeps its old chunks and is not queued again and again. The stored
# copy is read: a URL document's page is not fetched again, unless the page had failed (its
# copy is then the last good page, which says nothing of the page now). $1 NULL: the
# embedding model is not checked.
STALE_SQL = """
UPDATE documents d
SET status = 'pending', reread = (d.source_kind <> 'url' OR d.status = 'ready'), attempts = 0,
    lease_expires_at = NULL, updated_at = now()
WHERE d.status IN ('ready', 'failed')
  AND (d.extraction_version < $2
       OR (d.embedding_model IS DISTINCT FROM $1
           AND EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = d.id AND c.embedding_model <> $1)))
"""

RENEW_SQL = """
UPDATE documents SET lease_expires_at = now() + make_interval(secs => $3)
WHERE id = $1 AND lease_owner = $2 AND status = 'processing'
"""

PROGRESS_SQL = """
UPDATE documents SET progress_done = $3, progress_total = $4
WHERE id = $1 AND lease_owner = $2
"""

# A URL document's size is known only once its page is fetched. Its storage is checked then,
# under the same organisation lock the API takes (organisation before document, as there).
LOCK_ORG_SQL = "SELECT 1 FROM organisations WHERE id = $1 FOR NO KEY UPDATE"
OTHER_STORED_BYTES_SQL = "SELECT coalesce(sum(size_bytes), 0) FROM documents WHERE org_id = $1 AND id <> $2"

LOCK_LEASED_SQL = """
SELECT 1 FROM documents WHERE id = $1 AND lease_owner = $2 AND status = 'processing' FOR UPDATE
"""

DELETE_CHUNKS_SQL = "DELETE FROM chunks WHERE document_id = $1"

# One statement inserts every chunk of a document; tsv weights the title and section
# above the body so a chunk is found by what it is about as well as by what it says, and
# holds the days and months its hours cover in words it does not write ("Mon-Fri", "Apr-Oct":
# ChunkRow.days).
INSERT_CHUNKS_SQL = """
INSERT INTO chunks (org_id, kb_id, document_id, ordinal, text, section, page, token_count,
                    embedding_model, embedding_dim, embedding, tsv)
SELECT $1, $2, $3, u.ordinal, u.text, u.section, u.page, u.token_count, $4, $5, u.embedding::vector,
       setweight(to_tsvector($6::regconfig, coalesce($7, '') || ' ' || coalesce(u.section, '')), 'A')
       || to_tsvector($6::regconfig, u.text) || to_tsvector($6::regconfig, u.days)
FROM unnest($8::int[], $9::text[], $10::text[], $11::int[], $12::int[], $13::text[], $14::text[])
     AS u(ordinal, text, section, page, token_count, embedding, days)
"""

# A re-read (the stored copy read again, reread) fetched nothing: the page's sync stays when
# it was due. Any other finish schedules the next sync from now.
FINISH_READY_SQL = """
UPDATE documents
SET status = 'ready', error = NULL, chunk_count = $3, text = $4, title = $5, pages_total = $6,
    pages_skipped = $7, content_hash = $8, original = coalesce($9, original), source_kind = $10,
    size_bytes = coalesce(octet_length($9), size_bytes),
    etag = $11, last_modified = $12, indexed_at = now(), updated_at = now(),
    progress_done = $3, progress_total = $3, lease_owner = NULL, lease_expires_at = NULL,
    next_sync_at = CASE WHEN reread AND next_sync_at IS NOT NULL THEN next_sync_at
                        WHEN sync_interval_s > 0 THEN now() + make_interval(secs => sync_interval_s) END,
    reread = false, fetched_kind = $13, fetched_charset = $14, extraction_version = $15, embedding_model = $16
WHERE id = $1 AND lease_owner = $2
"""

# Nothing changed (a 304 or the same content hash): keep the chunks, refresh the sync time.
FINISH_UNCHANGED_SQL = """
UPDATE documents
SET status = 'ready', error = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = now(),
    progress_done = chunk_count, progress_total = chunk_count, etag = coalesce($3, etag),
    last_modified = coalesce($4, last_modified), reread = false,
    next_sync_at = CASE WHEN reread AND next_sync_at IS NOT NULL THEN next_sync_at
                        WHEN sync_interval_s > 0 THEN now() + make_interval(secs => sync_interval_s) END
WHERE id = $1 AND lease_owner = $2
"""

# A failure never touches the chunks: the previous version keeps answering.
FAIL_SQL = """
UPDATE documents
SET status = 'failed', error = $3, lease_owner = NULL, lease_expires_at = NULL, updated_at = now(),
    reread = false, extraction_version = $4, embedding_model = $5,
    next_sync_at = CASE WHEN reread AND next_sync_at IS NOT NULL THEN next_sync_at
                        WHEN sync_interval_s > 0 THEN now() + make_interval(secs => sync_interval_s) END
WHERE id = $1 AND lease_owner = $2
"""

RETRY_LATER_SQL = """
UPDATE documents
SET status = 'pending', error = $3, lease_owner = NULL,
    lease_expires_at = now() + make_interval(secs => $4), updated_at = now()
WHERE id = $1 AND lease_owner = $2
"""

# Counts embedding tokens against the organisation's daily quota; no row back = over quota.
USAGE_SQL = """
INSERT INTO usage_daily AS u (org_id, day, embedding_tokens)
SELECT $1::uuid, (now() AT TIME ZONE 'UTC')::date, $2::bigint WHERE $2::bigint <= $3::bigint
ON CONFLICT (org_id, day) DO UPDATE SET embedding_tokens = u.embedding_tokens + excluded.embedding_tokens
WHERE u.embedding_tokens + excluded.embedding_tokens <= $3::bigint
RETURNING embedding_tokens
"""

# Waiting for tomorrow's quota is not a failed attempt.
WAIT_QUOTA_SQL = """
UPDATE documents
SET status = 'pending', error = $3, lease_owner = NULL, attempts = greatest(attempts - 1, 0),
    lease_expires_at = date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '1 day',
    updated_at = now()
WHERE id = $1 AND lease_owner = $2
"""

CACHE_GET_SQL = """
SELECT text_hash, embedding::text AS embedding FROM embedding_cache
WHERE model_key = $1 AND text_hash = ANY($2::bytea[])
"""

CACHE_HAS_SQL = """
SELECT text_hash FROM embedding_cache WHERE model_key = $1 AND text_hash = ANY($2::bytea[])
"""

CACHE_PUT_SQL = """
INSERT INTO embedding_cache (model_key, text_hash, embedding)
SELECT $1, h, e::vector FROM unnest($2::bytea[], $3::text[]) AS u(h, e)
ON CONFLICT DO NOTHING
"""

QUEUE_DEPTH_SQL = "SELECT status, count(*) AS n FROM documents GROUP BY status"


@dataclass(slots=True)
class ClaimedDocument:
    id: uuid.UUID
    lease: str  # this claim's token in lease_owner: every write that finishes the job is fenced by it
    org_id: uuid.UUID
    kb_id: uuid.UUID
    title: str
    source_kind: str
    source_url: str | None
    file_name: str | None
    original: bytes | None
    content_hash: str | None
    chunk_count: int
    attempts: int
    etag: str | None
    last_modified: str | None
    reread: bool  # read `original` again (a new embedder or extractor), fetch nothing
    fetched_kind: str | None  # a URL document's page kind as fetched
    fetched_charset: str | None
    language: str
    chunk_tokens: int
    chunk_overlap_tokens: int

    @classmethod
    def from_row(cls, row: Any) -> ClaimedDocument:
        return cls(**{k: row[k] for k in cls.__slots__})


@dataclass(frozen=True, slots=True)
class ChunkRow:
    ordinal: int
    text: str
    section: str | None
    page: int | None
    token_count: int
    embedding: str  # pgvector text form, e.g. "[0.1,0.2]"
    days: str = ""  # the days and months its hours cover, in words it does not write (searched)


def chunk_columns(rows: Sequence[ChunkRow]) -> tuple[list[Any], ...]:
    return (
        [r.ordinal for r in rows],
        [r.text for r in rows],
        [r.section for r in rows],
        [r.page for r in rows],
        [r.token_count for r in rows],
        [r.embedding for r in rows],
        [r.days for r in rows],
    )
