"""The chunk ids of a document from an index alone.

A call with filters (or with a document outside its validity window) leaves out the chunks
of its hidden documents, and AGENT_CONTEXT_SQL's BM25 looks them up by ``document_id``. The
only index on that column (the ``(document_id, ordinal)`` key) does not hold ``id``, so each
lookup read the chunks' heap pages, whose rows carry their text and vector: 1.5 ms and about
180 pages read from outside shared_buffers for 10 hidden documents of 50 chunks each, in a
benchmark of 100,000 chunks (docs/BENCHMARKS.md). With ``id`` in the index it is an
index-only scan: 0.12 ms, 7 pages. The index costs about 40 bytes a chunk.

Revision ID: 0021
Revises: 0020
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE INDEX ix_chunks_document ON chunks (document_id) INCLUDE (id)")


def downgrade() -> None:
    op.execute("DROP INDEX ix_chunks_document")
