"""What a document needs to be read again without its source: a URL document's page kind and
charset as fetched (its copy is in ``original``), the extraction version that last read it,
and whether it is queued to be re-read from that copy (a new embedder or extractor) rather
than fetched again.

Every document indexed before this revision carries extraction version 0 and is re-read once
by the first worker to start (app/ingestion/extract.py EXTRACTION_VERSION).

Revision ID: 0025
Revises: 0024
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE documents"
        " ADD COLUMN reread boolean NOT NULL DEFAULT false,"
        " ADD COLUMN fetched_kind varchar(16) CHECK (fetched_kind IN ('text', 'markdown', 'html', 'pdf')),"
        " ADD COLUMN fetched_charset varchar(40),"
        " ADD COLUMN extraction_version integer NOT NULL DEFAULT 0,"
        " ADD COLUMN embedding_model varchar(200)"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE documents DROP COLUMN reread, DROP COLUMN fetched_kind, DROP COLUMN fetched_charset,"
        " DROP COLUMN extraction_version, DROP COLUMN embedding_model"
    )
