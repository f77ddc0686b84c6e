"""Find a knowledge base's documents by content hash.

A new document whose content the KB already holds is refused as a duplicate (409) unless
the client allows it, so every upload first looks its hash up among the KB's documents,
under the KB's row lock. Without an index that lookup read every document of the KB
(up to ``limits.documents_per_kb``, 10,000 by default) on each upload.

Not a unique index: duplicates stay possible by choice (``allow_duplicate``), databases
already hold identical uploads made before the check, and the worker sets a URL document's
hash to whatever its page returns.

Revision ID: 0010
Revises: 0009
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # URL documents not fetched yet have no hash: nothing to find them by.
    op.execute(
        "CREATE INDEX ix_documents_kb_content_hash ON documents (kb_id, content_hash)"
        " WHERE content_hash IS NOT NULL"
    )


def downgrade() -> None:
    op.execute("DROP INDEX ix_documents_kb_content_hash")
