"""Move chunk tsvectors out of the row: only the embedding stays inline.

0003 kept the tsvector inline because full-text ranking read it for every matching chunk.
Since 0004, BM25 reads chunk_terms and nothing on the query path reads chunks.tsv (the
triggers of 0004 read it when chunks are inserted or deleted). Inline, it made a chunk row
~4.1 KB at 512 dimensions (embedding 2.1 KB, tsvector 1.1 KB, compressed text 0.8 KB): two
rows a page, so exact search over a 1,000-chunk KB read ~500 pages. Out of line with the
text, a row is ~2.2 KB: three a page, a third fewer pages read per search and a third
less of the table to keep in shared_buffers. At 1,536 dimensions a row takes a page of its
own either way; this leaves the embedding the only column TOAST may not move.

Existing rows keep their layout until rewritten (re-indexing a document, or
``VACUUM FULL chunks`` in a maintenance window: docs/OPERATIONS.md).

Revision ID: 0005
Revises: 0004
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE chunks ALTER COLUMN tsv SET STORAGE EXTENDED")


def downgrade() -> None:
    op.execute("ALTER TABLE chunks ALTER COLUMN tsv SET STORAGE MAIN")
