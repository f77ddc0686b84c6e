"""Documents keep the relative path they were synced from.

``vk sync`` keeps a knowledge base equal to a folder (a git checkout in CI/CD): each file's
document is found again by its path, so a changed file replaces its document's content and
an unchanged one costs nothing. ``source_path`` holds that path, normalised by the service
(forward slashes, no ``.`` or ``..`` segments, never absolute); NULL for documents added
any other way.

Unique per knowledge base when set: one path is one document, and two concurrent uploads
of a new path cannot both insert it. The index also serves the lookups by path (an upsert,
the document list's ``?source_path=`` filter).

Revision ID: 0015
Revises: 0014
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE documents ADD COLUMN source_path text"
        " CHECK (source_path IS NULL OR char_length(source_path) BETWEEN 1 AND 1024)"
    )
    op.execute(
        "CREATE UNIQUE INDEX ux_documents_kb_source_path ON documents (kb_id, source_path)"
        " WHERE source_path IS NOT NULL"
    )


def downgrade() -> None:
    op.execute("DROP INDEX ux_documents_kb_source_path")
    op.execute("ALTER TABLE documents DROP COLUMN source_path")
