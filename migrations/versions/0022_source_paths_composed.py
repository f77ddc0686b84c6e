"""Stored source paths in their composed Unicode form (NFC), as the service now writes them.

``normalise_path`` composes characters, so that one file gives one path whether its name came
from macOS ("e" and a combining accent) or from Linux and Windows ("é"). Paths stored before
are composed here. Where a knowledge base already holds the composed spelling, or two stored
spellings compose alike, only one takes it (the oldest document); the other keeps its old
spelling, which the next sync finds missing from the folder.

Revision ID: 0022
Revises: 0021
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        WITH spelt AS (
            SELECT id, kb_id, normalize(source_path, NFC) AS composed,
                   row_number() OVER (
                       PARTITION BY kb_id, normalize(source_path, NFC) ORDER BY created_at, id
                   ) AS nth
            FROM documents
            WHERE source_path IS NOT NULL AND source_path IS NOT NFC NORMALIZED
        )
        UPDATE documents d SET source_path = spelt.composed
        FROM spelt
        WHERE d.id = spelt.id
          AND spelt.nth = 1
          AND NOT EXISTS (
              SELECT 1 FROM documents o WHERE o.kb_id = spelt.kb_id AND o.source_path = spelt.composed
          )
        """
    )


def downgrade() -> None:
    pass  # the decomposed spellings are not kept; composed paths are valid paths before 0022 too
