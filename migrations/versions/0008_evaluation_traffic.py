"""The query log tells evaluation calls from callers' questions.

``vk eval`` and ``vk replay`` ask through the real query endpoint, and their calls were
logged like any caller's: every replayed question counted again in the knowledge gaps.
Calls sent with ``X-Evaluation: true`` are now logged with ``evaluation`` set; the gaps
leave them out and the agent's query log labels (and can filter) them. Existing rows were
all taken for callers' calls.

Revision ID: 0008
Revises: 0007
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A constant default: PostgreSQL adds the column without rewriting the table.
    op.execute("ALTER TABLE query_log ADD COLUMN evaluation boolean NOT NULL DEFAULT false")


def downgrade() -> None:
    op.execute("ALTER TABLE query_log DROP COLUMN evaluation")
