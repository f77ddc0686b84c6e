"""Site crawls as a knowledge source.

A crawl walks one site from a start URL (its sitemap, then its links) and keeps every page
as a document of its knowledge base. The ``crawls`` table is also the crawl queue, leased
like the documents table (``FOR UPDATE SKIP LOCKED``, lease owner and expiry), so a crawl
survives a worker restart. ``documents.crawl_id`` links a page to its crawl; the page's URL
is the document's ``source_url``. Deleting a crawl deletes its pages (and their chunks).

Revision ID: 0012
Revises: 0011
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("""
    CREATE TABLE crawls (
        id uuid PRIMARY KEY,
        org_id uuid NOT NULL REFERENCES organisations(id) ON DELETE CASCADE,
        kb_id uuid NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
        start_url varchar(2048) NOT NULL,
        max_depth integer NOT NULL,
        max_pages integer NOT NULL,
        include_patterns text[] NOT NULL DEFAULT '{}',
        exclude_patterns text[] NOT NULL DEFAULT '{}',
        use_sitemap boolean NOT NULL DEFAULT true,
        sync_interval_s integer,
        next_run_at timestamptz,
        status varchar(16) NOT NULL DEFAULT 'queued'
            CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
        cancel_requested boolean NOT NULL DEFAULT false,
        pages_found integer NOT NULL DEFAULT 0,
        pages_read integer NOT NULL DEFAULT 0,
        pages_unchanged integer NOT NULL DEFAULT 0,
        pages_failed integer NOT NULL DEFAULT 0,
        pages_skipped integer NOT NULL DEFAULT 0,
        pages_retired integer NOT NULL DEFAULT 0,
        problems jsonb NOT NULL DEFAULT '[]',
        error varchar(2000),
        attempts integer NOT NULL DEFAULT 0,
        lease_owner varchar(100),
        lease_expires_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz,
        started_at timestamptz,
        finished_at timestamptz
    )""")
    op.execute("CREATE INDEX ix_crawls_kb ON crawls (kb_id, created_at)")
    op.execute("CREATE INDEX ix_crawls_queue ON crawls (created_at) WHERE status IN ('queued', 'running')")
    op.execute("CREATE INDEX ix_crawls_due ON crawls (next_run_at) WHERE next_run_at IS NOT NULL")
    op.execute("ALTER TABLE documents ADD COLUMN crawl_id uuid REFERENCES crawls(id) ON DELETE CASCADE")
    op.execute(
        "CREATE INDEX ix_documents_crawl ON documents (crawl_id, source_url) WHERE crawl_id IS NOT NULL"
    )


def downgrade() -> None:
    op.execute("DELETE FROM documents WHERE crawl_id IS NOT NULL")
    op.execute("ALTER TABLE documents DROP COLUMN crawl_id")
    op.execute("DROP TABLE crawls")
