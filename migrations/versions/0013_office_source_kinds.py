"""Office and table files as document sources: ``documents.source_kind`` may be docx, pptx,
xlsx or csv.

The kind is what the worker reads the stored bytes as, and what the API shows; the CHECK of
migration 0001 allowed only the text kinds and PDF, so an uploaded Word file could not be
stored. Macro-enabled variants (.docm, .pptm, .xlsm) are stored as their plain kind: only
their text is read.

Revision ID: 0013
Revises: 0012
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE documents DROP CONSTRAINT documents_source_kind_check,"
        " ADD CONSTRAINT documents_source_kind_check CHECK (source_kind IN"
        " ('text', 'markdown', 'html', 'pdf', 'url', 'docx', 'pptx', 'xlsx', 'csv'))"
    )


def downgrade() -> None:
    # Documents of the new kinds cannot be kept under the old rule.
    op.execute("DELETE FROM documents WHERE source_kind IN ('docx', 'pptx', 'xlsx', 'csv')")
    op.execute(
        "ALTER TABLE documents DROP CONSTRAINT documents_source_kind_check,"
        " ADD CONSTRAINT documents_source_kind_check CHECK (source_kind IN"
        " ('text', 'markdown', 'html', 'pdf', 'url'))"
    )
