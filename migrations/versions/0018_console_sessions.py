"""Console sessions: who is signed in to the admin console in a browser.

The browser holds a random session token in an HttpOnly cookie; the table holds only its
SHA-256, so a copy of the table cannot sign anyone in. Neither holds the API key that was
used to sign in: ``key_id`` names it, and every request checks that it is still an
unrevoked admin key (revoking it ends its sessions at once). ``csrf_token`` is the
per-session secret every state-changing form carries. Idle and absolute expiry are checked
against ``last_seen_at`` and ``expires_at``; sessions go with their key or organisation.

Revision ID: 0018
Revises: 0017
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE console_sessions (
            token_hash bytea PRIMARY KEY CHECK (length(token_hash) = 32),
            org_id uuid NOT NULL REFERENCES organisations(id) ON DELETE CASCADE,
            key_id uuid NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
            csrf_token text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            last_seen_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL
        )
        """
    )
    # Sign-out everywhere for a key, and the sweep of expired sessions at each sign-in.
    op.execute("CREATE INDEX console_sessions_key_id ON console_sessions (key_id)")
    op.execute("CREATE INDEX console_sessions_expires_at ON console_sessions (expires_at)")
    op.execute("CREATE INDEX console_sessions_org_id ON console_sessions (org_id)")


def downgrade() -> None:
    op.execute("DROP TABLE console_sessions")
