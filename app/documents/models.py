from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import BigInteger, Column, Identity, LargeBinary, Text
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR
from sqlalchemy.orm import deferred
from sqlmodel import Field, SQLModel

from app.db.base import created_at_field, optional_ts_field, parent_fk

SOURCE_KINDS = ("text", "markdown", "html", "pdf", "url")
STATUSES = ("pending", "processing", "ready", "failed")


class Document(SQLModel, table=True):
    __tablename__ = "documents"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    org_id: uuid.UUID = parent_fk("organisations.id")
    kb_id: uuid.UUID = parent_fk("knowledge_bases.id")
    title: str = Field(max_length=300)
    description: str = Field(default="", max_length=2000)
    source_kind: str = Field(max_length=16)
    source_url: str | None = Field(default=None, max_length=2048)
    file_name: str | None = Field(default=None, max_length=255)
    # Where a synced file lives in its folder (normalised, unique per KB): app/documents/paths.py.
    source_path: str | None = Field(default=None, max_length=1024)
    # What was uploaded, posted or fetched, kept so a document can be re-processed.
    original: bytes | None = Field(default=None, sa_column=deferred(Column(LargeBinary, nullable=True)))  # type: ignore[call-overload]
    text: str | None = Field(default=None, sa_column=deferred(Column(Text, nullable=True)))  # type: ignore[call-overload]
    content_hash: str | None = Field(default=None, max_length=64)
    size_bytes: int = 0
    status: str = Field(default="pending", max_length=16)
    error: str | None = Field(default=None, max_length=2000)
    chunk_count: int = 0
    progress_done: int = 0
    progress_total: int = 0
    pages_total: int | None = None
    pages_skipped: int = 0
    # Durable job state: the documents table is the ingestion queue.
    attempts: int = 0
    lease_owner: str | None = Field(default=None, max_length=100)
    lease_expires_at: datetime | None = optional_ts_field()
    # URL documents: conditional re-sync.
    etag: str | None = Field(default=None, max_length=500)
    last_modified: str | None = Field(default=None, max_length=100)
    sync_interval_s: int | None = None
    next_sync_at: datetime | None = optional_ts_field()
    # Reading a document again without its source (a new embedder or extractor): a URL
    # document's page kind and charset as fetched, its copy being in `original`.
    fetched_kind: str | None = Field(default=None, max_length=16)
    fetched_charset: str | None = Field(default=None, max_length=40)
    extraction_version: int = 0  # the EXTRACTION_VERSION that last read it (app/ingestion/extract.py)
    embedding_model: str | None = Field(default=None, max_length=200)  # the embedder that last read it
    reread: bool = False  # queued to be read again from `original`, not fetched
    # What filters select by, and when the document may answer (app/documents/attributes.py).
    tags: list[str] = Field(
        default_factory=list,
        sa_column=Column(ARRAY(Text), nullable=False, server_default=sql_text("'{}'")),
    )
    attributes: dict[str, str] = Field(
        default_factory=dict,
        sa_column=Column(JSONB, nullable=False, server_default=sql_text("'{}'")),
    )
    effective_from: datetime | None = optional_ts_field()
    expires_at: datetime | None = optional_ts_field()
    created_at: datetime = created_at_field()
    updated_at: datetime | None = optional_ts_field()
    indexed_at: datetime | None = optional_ts_field()


class Chunk(SQLModel, table=True):
    __tablename__ = "chunks"

    id: int | None = Field(default=None, sa_column=Column(BigInteger, Identity(), primary_key=True))
    org_id: uuid.UUID = parent_fk("organisations.id")
    kb_id: uuid.UUID = parent_fk("knowledge_bases.id")
    document_id: uuid.UUID = parent_fk("documents.id")
    ordinal: int
    text: str = Field(sa_column=Column(Text, nullable=False))
    section: str | None = Field(default=None, max_length=500)
    page: int | None = None
    token_count: int
    embedding_model: str = Field(max_length=200)
    embedding_dim: int
    # Untyped vector: the dimension depends on the configured model. HNSW indexes are
    # expression indexes on embedding::vector(N), one per dimension in use.
    embedding: Any = Field(sa_column=Column(Vector(), nullable=False))
    tsv: Any = Field(sa_column=Column(TSVECTOR, nullable=False))
    created_at: datetime = created_at_field()
