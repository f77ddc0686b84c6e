"""Rate-limit counters, daily usage for quotas, and per-agent settings (prompt variant).

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # UNLOGGED: counters are worth nothing after a crash, and skipping WAL keeps the
    # one write per request cheap.
    op.execute("""
    CREATE UNLOGGED TABLE rate_counters (
        bucket varchar(100) NOT NULL,
        window_start timestamptz NOT NULL,
        count integer NOT NULL,
        PRIMARY KEY (bucket, window_start)
    )""")
    op.execute("""
    CREATE TABLE usage_daily (
        org_id uuid NOT NULL REFERENCES organisations(id) ON DELETE CASCADE,
        day date NOT NULL,
        embedding_tokens bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (org_id, day)
    )""")
    op.execute("""
    CREATE TABLE agents (
        org_id uuid NOT NULL REFERENCES organisations(id) ON DELETE CASCADE,
        agent_id uuid NOT NULL,
        prompt_variant varchar(50),
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (org_id, agent_id)
    )""")
    op.execute("ALTER TABLE documents ADD COLUMN size_bytes bigint NOT NULL DEFAULT 0")
    op.execute("UPDATE documents SET size_bytes = coalesce(octet_length(original), 0)")


def downgrade() -> None:
    op.execute("ALTER TABLE documents DROP COLUMN size_bytes")
    op.execute("DROP TABLE agents")
    op.execute("DROP TABLE usage_daily")
    op.execute("DROP TABLE rate_counters")
