"""Semantic answer cache: the query log says which earlier question's answer was reused.

A reply served by the semantic answer cache (app/query/semantic_cache.py) is logged with
``cached = true`` like an exact hit, plus the paraphrase it matched: its question, the
cosine similarity of the two questions' embeddings and its query id (a row of this same
log), so a wrong reuse can be traced and the threshold judged from real traffic. The
matches themselves live in each process's memory: no table.

Revision ID: 0019
Revises: 0018
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE query_log ADD COLUMN semantic_question text,"
        " ADD COLUMN semantic_similarity real, ADD COLUMN semantic_query_id uuid"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE query_log DROP COLUMN semantic_question, DROP COLUMN semantic_similarity,"
        " DROP COLUMN semantic_query_id"
    )
