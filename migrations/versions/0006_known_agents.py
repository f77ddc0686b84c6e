"""Agents are known to an organisation from their first assignment on.

Until now an agent existed only through its current assignments, so unassigning its last
knowledge base made it unknown: a live call then got a 404 instead of a spoken "I don't
have that information". Assigning a KB now also registers the agent in ``agents``; this
registers every agent assigned today.

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("""
    INSERT INTO agents (org_id, agent_id)
    SELECT DISTINCT org_id, agent_id FROM agent_assignments
    ON CONFLICT (org_id, agent_id) DO NOTHING
    """)


def downgrade() -> None:
    # The rows are harmless to the older code, which reads only their prompt_variant.
    pass
