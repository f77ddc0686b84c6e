"""Conversation context: the standalone question a call was searched and answered with.

A query_knowledge call may send the last turns of the conversation; a follow-up such as
"How much is it?" is then made standalone ("How much is it (crown)?") before it is
searched, and that question keys the answer cache. The log keeps both: ``query`` stays the
caller's words, ``standalone_question`` holds what was searched (null when it is the
caller's own) and ``standalone_method`` how it was made: ``none``, ``offline`` (word rules)
or ``model`` (the chat model's rewrite). Rows logged before this migration have neither.

Revision ID: 0016
Revises: 0015
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
# The brief's base is 0011; this worktree already holds 0012 (crawls), so 0016 follows it
# here to keep one head. The lead re-chains the revisions when merging.
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE query_log ADD COLUMN standalone_question text,"
        " ADD COLUMN standalone_method text"
        " CHECK (standalone_method IN ('none', 'offline', 'model'))"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE query_log DROP COLUMN standalone_method, DROP COLUMN standalone_question")
