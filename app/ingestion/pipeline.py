"""Turning one queued document into searchable chunks: fetch (URLs), extract, chunk,
embed (through the cache), then swap the chunks in with one fenced transaction."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.answering.extractive import passage_sentences, texts_to_embed
from app.answering.speech import implied_date_words
from app.config import IngestionSettings
from app.db.engine import raw_connection
from app.embeddings.base import Embedder, EmbeddingError
from app.ingestion import repository as sql
from app.ingestion.chunking import Chunk, chunk_sections, get_encoding
from app.ingestion.extract import (
    EXTRACTION_VERSION,
    Extracted,
    ExtractionError,
    extract,
    extract_isolated,
    kind_of_bytes,
    parsed_in_child,
)
from app.ingestion.extract_model import NO_WORDS, holds_words
from app.ingestion.fetch import BlockedURL, Fetcher, FetchError
from app.ingestion.repository import ChunkRow, ClaimedDocument
from app.keys.repository import PRUNE_RATE_COUNTERS_SQL
from app.observability.metrics import INGESTION_JOBS, INGESTION_QUEUE, PROVIDER_ERRORS
from app.query.repository import PRUNE_ANSWER_CACHE_SQL
from app.query.sentences import ContextEncoder, SentenceEncoder, in_chunk_hash, in_chunk_key, text_hash

log = logging.getLogger(__name__)

_KIND_BY_TYPE = {
    "text/html": "html",
    "application/xhtml+xml": "html",
    "text/plain": "text",
    "text/markdown": "markdown",
    "application/pdf": "pdf",
}
EMBED_SLICE = 256  # texts per progress step; the embedder batches further within API limits
SENTENCE_SLICE = 64  # sentences per thread hop and per write: progress is saved as it goes


class LeaseLost(Exception):
    """Another worker took this document over; drop the work without writing."""


class QuotaWait(Exception):
    """The organisation's daily embedding quota is spent: wait for the next UTC day."""


class Retryable(Exception):
    """A passing failure (provider or network): try again later, up to the attempt limit."""


@dataclass(frozen=True, slots=True)
class _Page:
    kind: str  # how to read it, from its content type
    content: bytes | None  # None: unchanged since the chunks were made from it
    etag: str | None
    last_modified: str | None
    charset: str | None


@dataclass(slots=True)
class Outcome:
    status: str  # ready | unchanged | failed | retry | lost
    detail: str | None = None


def vector_text(values: Sequence[float]) -> str:
    return json.dumps(list(values), separators=(",", ":"))


class Ingestor:
    """Processes claimed documents. Stateless between documents; safe to run many at once."""

    def __init__(
        self,
        engine: AsyncEngine,
        embedder: Embedder,
        fetcher: Fetcher,
        settings: IngestionSettings,
        owner: str,
        *,
        quota_tokens_per_day: int = 0,
        storage_quota_bytes: int = 0,
    ) -> None:
        self.quota_tokens_per_day = quota_tokens_per_day
        self.storage_quota_bytes = storage_quota_bytes  # 0: not checked
        self.engine = engine
        self.embedder = embedder
        self.fetcher = fetcher
        self.settings = settings
        self.owner = owner
        self.encoding = get_encoding("cl100k_base")
        # Each PDF or Office parse is a child process allowed parse_memory_mb; bound how many
        # run at once so a burst of uploads cannot exhaust the machine.
        self._parse_slots = asyncio.Semaphore(max(1, settings.parse_concurrency))

    async def claim(self, limit: int = 1) -> list[ClaimedDocument]:
        # Each claim gets its own lease token: the loops of one pool share ``owner``, and a
        # document re-queued by an edit may be taken again by this pool while the loop on the
        # old version still runs; fencing by owner alone would let that loop write stale chunks.
        lease = f"{self.owner}/{uuid.uuid4().hex[:12]}"
        args = (lease, self.settings.lease_s, self.settings.max_attempts)
        async with raw_connection(self.engine) as conn:
            rows = await conn.fetch(sql.CLAIM_SQL, *args, limit)
        return [ClaimedDocument.from_row(r) for r in rows]

    async def maintenance(self, embedder_key: str | None = None) -> None:
        async with raw_connection(self.engine) as conn:
            await conn.execute(
                sql.GIVE_UP_SQL, self.settings.max_attempts, EXTRACTION_VERSION, self.embedder.model_key
            )
            await conn.execute(sql.DUE_SYNC_SQL)
            await conn.execute(PRUNE_RATE_COUNTERS_SQL)
            await conn.execute(PRUNE_ANSWER_CACHE_SQL)
            for row in await conn.fetch(sql.QUEUE_DEPTH_SQL):
                INGESTION_QUEUE.labels(row["status"]).set(row["n"])
            await conn.execute(sql.STALE_SQL, embedder_key or None, EXTRACTION_VERSION)

    async def process(self, doc: ClaimedDocument) -> Outcome:
        """Run one claimed document to an outcome; never raises for a bad document."""
        outcome = await self._process_with_lease(doc)
        INGESTION_JOBS.labels(outcome.status).inc()
        return outcome

    async def _process_with_lease(self, doc: ClaimedDocument) -> Outcome:
        heartbeat = asyncio.create_task(self._heartbeat(doc, asyncio.current_task()))
        try:
            return await self._process(doc)
        except LeaseLost:
            log.warning("lease on document %s lost; another worker owns it now", doc.id)
            return Outcome("lost")
        except asyncio.CancelledError:
            if heartbeat.done() and heartbeat.result() is False:
                return Outcome("lost")
            raise
        except (ExtractionError, BlockedURL) as exc:
            return await self._fail(doc, str(exc))
        except Retryable as exc:
            return await self._retry_or_fail(doc, str(exc))
        except QuotaWait as exc:
            async with raw_connection(self.engine) as conn:
                await conn.execute(sql.WAIT_QUOTA_SQL, doc.id, doc.lease, str(exc))
            return Outcome("retry", str(exc))
        except Exception as exc:
            # The worker must outlive any document; unknown errors count as attempts.
            log.exception("unexpected error while processing document %s", doc.id)
            return await self._retry_or_fail(doc, f"unexpected error: {type(exc).__name__}")
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat

    async def _heartbeat(self, doc: ClaimedDocument, worker: asyncio.Task[object] | None) -> bool:
        interval = max(1.0, self.settings.lease_s / 3)
        while True:
            await asyncio.sleep(interval)
            try:
                async with raw_connection(self.engine) as conn:
                    renewed = await conn.execute(sql.RENEW_SQL, doc.id, doc.lease, self.settings.lease_s)
            except Exception:  # noqa: BLE001 - a missed renewal is retried at the next beat
                log.warning("could not renew lease on %s", doc.id)
                continue
            if renewed.endswith(" 0"):
                if worker is not None:
                    worker.cancel()
                return False

    async def _process(self, doc: ClaimedDocument) -> Outcome:
        kind, data = doc.source_kind, doc.original
        etag, last_modified, fetched, charset = doc.etag, doc.last_modified, None, None
        if kind == "url" and doc.reread and doc.original:
            # Read again for a new embedder or extractor: the page as it was fetched. A fetch
            # could fail or answer 304 (unchanged), neither of which re-reads anything. A page
            # fetched before its kind was kept is told by its bytes (HTML, a PDF, else text).
            parse_kind = doc.fetched_kind or kind_of_bytes("text", doc.original)
            charset = doc.fetched_charset
        elif kind == "url":
            page = await self._fetch(doc)
            if page.content is None:
                return await self._unchanged(doc, page.etag, page.last_modified)
            parse_kind, data, fetched, charset = page.kind, page.content, page.content, page.charset
            etag, last_modified = page.etag, page.last_modified
        else:
            parse_kind = kind
        if not data:
            raise ExtractionError("no text found")

        extracted = await self._extract(parse_kind, data, charset)
        if not holds_words(extracted.sections):
            raise ExtractionError(NO_WORDS)
        if extracted.pages_skipped:
            # The document is still indexed from the pages that were read; say what is missing.
            log.info(
                "document %s: %d of %d PDF pages not read (broken, or beyond the page cap)",
                doc.id,
                extracted.pages_skipped,
                extracted.pages_total,
            )
        title = doc.title
        if kind == "url" and doc.title == doc.source_url and extracted.title:
            title = extracted.title[:300]
        chunks = await asyncio.to_thread(
            chunk_sections,
            title,
            extracted.sections,
            chunk_tokens=doc.chunk_tokens,
            overlap_tokens=doc.chunk_overlap_tokens,
            encoding=self.encoding,
        )
        if not chunks:
            raise ExtractionError("no text found")
        vectors = await self._embed(doc, chunks)
        if isinstance(self.embedder, SentenceEncoder):
            await self._embed_sentences(self.embedder, doc, chunks)
        rows = [
            ChunkRow(
                c.ordinal, c.text, c.section, c.page, c.token_count, v, " ".join(implied_date_words(c.text))
            )
            for c, v in zip(chunks, vectors, strict=True)
        ]
        text = "\n\n".join(s.text for s in extracted.sections)
        await self._swap(
            doc,
            rows,
            text=text,
            title=title,
            extracted=extracted,
            fetched=fetched,
            etag=etag,
            last_modified=last_modified,
            content_hash=hashlib.sha256(data).hexdigest(),
            kind=kind,
            fetched_kind=parse_kind if kind == "url" else None,
            fetched_charset=charset if kind == "url" and charset and len(charset) <= 40 else None,
        )
        return Outcome("ready")

    async def _fetch(self, doc: ClaimedDocument) -> _Page:
        """A URL document's page; its content None when unchanged since the chunks were made
        from it. A re-read without a stored copy fetches the page whole: a 304 would keep the
        chunks it is to remake."""
        if not doc.source_url:
            raise ExtractionError("the document has no URL")
        conditional = not doc.reread and doc.chunk_count > 0
        try:
            result = await self.fetcher.fetch(
                doc.source_url,
                etag=doc.etag if conditional else None,
                last_modified=doc.last_modified if conditional else None,
            )
        except FetchError as exc:
            if exc.retryable:
                raise Retryable(str(exc)) from exc
            raise ExtractionError(str(exc)) from exc
        if result.status == 304 and conditional:
            return _Page("", None, result.etag, result.last_modified, None)
        kind = _KIND_BY_TYPE.get(result.content_type)
        if kind is None:
            raise ExtractionError(f"unsupported content type '{result.content_type}'")
        if conditional and hashlib.sha256(result.content).hexdigest() == doc.content_hash:
            return _Page(kind, None, result.etag, result.last_modified, None)
        return _Page(kind, result.content, result.etag, result.last_modified, result.charset)

    async def _extract(self, stored_kind: str, data: bytes, charset: str | None = None) -> Extracted:
        kind = kind_of_bytes(stored_kind, data)  # a PDF called text is read as a PDF, isolated
        if parsed_in_child(kind, data):
            async with self._parse_slots:
                return await extract_isolated(
                    kind,
                    data,
                    timeout_s=self.settings.parse_timeout_s,
                    page_timeout_s=self.settings.parse_page_timeout_s,
                    memory_mb=self.settings.parse_memory_mb,
                    charset=charset,
                )
        return await asyncio.to_thread(extract, kind, data, charset=charset)

    async def _embed(self, doc: ClaimedDocument, chunks: Sequence[Chunk]) -> list[str]:
        """The chunks' vectors, from the cache or embedded and kept there. An embedder that
        reads sentences in context also keeps, from the same pass, each chunk's sentences as
        read inside it (``SentenceVectors``); a chunk whose vector is kept from before they
        existed is read again for them."""
        key = self.embedder.model_key
        hashes = [text_hash(c.embed_text) for c in chunks]
        in_context = self.embedder if isinstance(self.embedder, ContextEncoder) else None
        sentences = [passage_sentences(c.text) for c in chunks] if in_context else []
        read_in = [[in_chunk_hash(h, s) for s in of] for h, of in zip(hashes, sentences, strict=False)]
        async with raw_connection(self.engine) as conn:
            cached = {
                bytes(r["text_hash"]): r["embedding"]
                for r in await conn.fetch(sql.CACHE_GET_SQL, key, hashes)
            }
            kept_in: set[bytes] = set()
            if in_context:
                flat = [h for of in read_in for h in of]
                rows = await conn.fetch(sql.CACHE_HAS_SQL, in_chunk_key(key), flat)
                kept_in = {bytes(r["text_hash"]) for r in rows}
            await conn.execute(sql.PROGRESS_SQL, doc.id, doc.lease, len(cached), len(chunks))
        missing = [i for i, h in enumerate(hashes) if h not in cached]
        again = [i for i, of in enumerate(read_in) if hashes[i] in cached and not kept_in.issuperset(of)]
        done = len(chunks) - len(missing)
        if missing and self.quota_tokens_per_day > 0:
            tokens = sum(len(self.encoding.encode_ordinary(chunks[i].embed_text)) for i in missing)
            if tokens > self.quota_tokens_per_day:
                raise ExtractionError(
                    f"the document needs {tokens} embedding tokens, more than the daily quota of"
                    f" {self.quota_tokens_per_day}"
                )
            async with raw_connection(self.engine) as conn:
                used = await conn.fetchval(sql.USAGE_SQL, doc.org_id, tokens, self.quota_tokens_per_day)
            if used is None:
                raise QuotaWait(
                    f"the organisation's daily embedding quota ({self.quota_tokens_per_day} tokens)"
                    " is used up; the document will be indexed after midnight UTC"
                )
        todo = sorted(missing + again)
        for start in range(0, len(todo), EMBED_SLICE):
            part = todo[start : start + EMBED_SLICE]
            embed_texts = [chunks[i].embed_text for i in part]
            try:
                if in_context:
                    vectors, read = await in_context.embed_in_context(
                        embed_texts, [sentences[i] for i in part]
                    )
                else:
                    vectors, read = await self.embedder.embed_documents(embed_texts), []
            except EmbeddingError as exc:
                PROVIDER_ERRORS.labels("embedding").inc()
                if exc.retryable:
                    raise Retryable(f"embedding failed: {exc}") from exc
                raise ExtractionError(f"embedding failed: {exc}") from exc
            texts = [vector_text(v) for v in vectors]
            for i, t in zip(part, texts, strict=True):
                cached.setdefault(hashes[i], t)
            done += sum(1 for i in part if i not in again)
            read_hashes, read_texts = [], []
            for i, of in zip(part, read, strict=False):
                for h, vector in zip(read_in[i], of, strict=True):
                    if vector is not None:
                        read_hashes.append(h)
                        read_texts.append(vector_text(vector.tolist()))
            async with raw_connection(self.engine) as conn:
                await conn.execute(sql.CACHE_PUT_SQL, key, [hashes[i] for i in part], texts)
                if read_hashes:
                    await conn.execute(sql.CACHE_PUT_SQL, in_chunk_key(key), read_hashes, read_texts)
                status = await conn.execute(sql.PROGRESS_SQL, doc.id, doc.lease, done, len(chunks))
            if status.endswith(" 0"):
                raise LeaseLost
        return [cached[h] for h in hashes]

    async def _embed_sentences(
        self, encoder: SentenceEncoder, doc: ClaimedDocument, chunks: Sequence[Chunk]
    ) -> None:
        """Store the vectors of every sentence the answerer may read in these chunks (and their
        headings and title), so that a call finds them instead of embedding them."""
        texts = list(dict.fromkeys(t for c in chunks for t in texts_to_embed(c.text, c.section, doc.title)))
        hashes = [text_hash(t) for t in texts]
        async with raw_connection(self.engine) as conn:
            known = {
                bytes(r["text_hash"]) for r in await conn.fetch(sql.CACHE_HAS_SQL, encoder.model_key, hashes)
            }
        missing = [i for i, h in enumerate(hashes) if h not in known]
        for start in range(0, len(missing), SENTENCE_SLICE):
            part = missing[start : start + SENTENCE_SLICE]
            matrix = await asyncio.to_thread(encoder.encode_many, [texts[i] for i in part])
            async with raw_connection(self.engine) as conn:
                await conn.execute(
                    sql.CACHE_PUT_SQL,
                    encoder.model_key,
                    [hashes[i] for i in part],
                    [vector_text(v) for v in matrix.tolist()],
                )

    async def _swap(
        self,
        doc: ClaimedDocument,
        rows: Sequence[ChunkRow],
        *,
        text: str,
        title: str,
        extracted: Extracted,
        fetched: bytes | None,
        etag: str | None,
        last_modified: str | None,
        content_hash: str,
        kind: str,
        fetched_kind: str | None,
        fetched_charset: str | None,
    ) -> None:
        # One transaction: the old chunks answer until the new ones replace them, and a
        # worker that lost its lease writes nothing (the row lock fences it). Triggers move
        # the KB's chunk count and content version (migration 0009).
        async with raw_connection(self.engine) as conn, conn.transaction():
            if fetched is not None and self.storage_quota_bytes:
                await self._check_storage(conn, doc, len(fetched))
            if await conn.fetchval(sql.LOCK_LEASED_SQL, doc.id, doc.lease) is None:
                raise LeaseLost
            await conn.execute(sql.DELETE_CHUNKS_SQL, doc.id)
            await conn.execute(
                sql.INSERT_CHUNKS_SQL,
                doc.org_id,
                doc.kb_id,
                doc.id,
                self.embedder.model_key,
                self.embedder.dimensions,
                doc.language,
                title,
                *sql.chunk_columns(rows),
            )
            await conn.execute(
                sql.FINISH_READY_SQL,
                doc.id,
                doc.lease,
                len(rows),
                text,
                title,
                extracted.pages_total,
                extracted.pages_skipped,
                content_hash,
                fetched,
                kind,
                etag,
                last_modified,
                fetched_kind,
                fetched_charset,
                EXTRACTION_VERSION,
                self.embedder.model_key,
            )

    async def _check_storage(self, conn: Any, doc: ClaimedDocument, size: int) -> None:
        """A fetched page must fit the organisation's storage quota, as an upload must; if it
        does not, the document fails and its previous version (if any) keeps answering."""
        await conn.execute(sql.LOCK_ORG_SQL, doc.org_id)
        others = await conn.fetchval(sql.OTHER_STORED_BYTES_SQL, doc.org_id, doc.id)
        if others + size > self.storage_quota_bytes:
            raise ExtractionError(
                f"the page ({size:,} bytes) would exceed the organisation's storage quota of "
                f"{self.storage_quota_bytes:,} bytes"
            )

    async def _unchanged(self, doc: ClaimedDocument, etag: str | None, last_modified: str | None) -> Outcome:
        async with raw_connection(self.engine) as conn:
            await conn.execute(sql.FINISH_UNCHANGED_SQL, doc.id, doc.lease, etag, last_modified)
        return Outcome("unchanged")

    async def _fail(self, doc: ClaimedDocument, reason: str) -> Outcome:
        async with raw_connection(self.engine) as conn:
            await conn.execute(
                sql.FAIL_SQL, doc.id, doc.lease, reason[:2000], EXTRACTION_VERSION, self.embedder.model_key
            )
        log.info("document %s failed: %s", doc.id, reason)
        return Outcome("failed", reason)

    async def _retry_or_fail(self, doc: ClaimedDocument, reason: str) -> Outcome:
        if doc.attempts >= self.settings.max_attempts:
            return await self._fail(doc, f"{reason} (gave up after {doc.attempts} attempts)")
        backoff = min(300.0, 2.0 * 4 ** (doc.attempts - 1))
        async with raw_connection(self.engine) as conn:
            await conn.execute(sql.RETRY_LATER_SQL, doc.id, doc.lease, reason[:2000], backoff)
        return Outcome("retry", reason)
