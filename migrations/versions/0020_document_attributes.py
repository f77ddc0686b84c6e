"""Document tags, attributes and validity window; agents' fixed filters; filters in the log.

A document carries ``tags`` (lower-case strings), ``attributes`` (string keys to string
values, such as ``locale`` or ``product_line``) and an optional validity window
(``effective_from``, ``expires_at``). query_knowledge never retrieves a document outside its
window, and narrows retrieval to the documents a call's filters (and its agent's fixed
filters) accept.

Where the rule is applied: on documents, once per call, not on chunks. The agent's context
statement (AGENT_CONTEXT_SQL) lists the agent's documents that are *hidden* (outside their
window at ``now()``, or refused by a filter); BM25 in the same statement and the vector
search after it (FUSED_SQL, or the in-memory copies of small KBs) leave out the chunks of
those documents. Both searches and both paths so read one list, made by one predicate, at
one instant: the in-memory and the SQL path cannot disagree, and time passing takes effect
on the next call with no write.

Copying the attributes onto chunks (and into ``chunk_terms``, which BM25 reads) was the
alternative: a filtered index scan per search, but a rewrite of every chunk and posting of a
document whenever its tags or dates change, a much wider chunks row for every query, and
still a comparison with ``now()`` per chunk. A KB holds at most ``documents_per_kb``
documents, and a call without filters reads only the documents that have a window, through
the partial index ``ix_documents_window`` (an empty index probe for most KBs). With filters
the agent's documents are read by ``ix_documents_kb``; the hidden documents' chunks are found
by ``chunks (document_id, ordinal)`` (migration 0001) for BM25 and excluded by a hashed
anti-join in the vector statement.

The hidden list is part of the answer-cache key, so a cached answer is never served once a
document it came from expires, nor to a call whose filters hide other documents. A change of
a document's tags, attributes or window also moves its KB's content version (the trigger of
migration 0009 on titles now watches these columns too), so in-memory copies and cached
answers keyed by the old version are dropped whoever writes.

``agents.filter_clauses`` holds an agent's fixed filters in the clause form that
``documents_match`` reads (app/query/filters.py converts both ways). ``query_log.filters``
records the filters a call applied and how many documents were hidden.

Revision ID: 0020
Revises: 0019
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("""
    ALTER TABLE documents
        ADD COLUMN tags text[] NOT NULL DEFAULT '{}',
        ADD COLUMN attributes jsonb NOT NULL DEFAULT '{}',
        ADD COLUMN effective_from timestamptz,
        ADD COLUMN expires_at timestamptz,
        ADD CONSTRAINT documents_window_check CHECK (expires_at > effective_from),
        ADD CONSTRAINT documents_attributes_check CHECK (jsonb_typeof(attributes) = 'object')
    """)
    op.execute(
        "CREATE INDEX ix_documents_window ON documents (kb_id)"
        " WHERE effective_from IS NOT NULL OR expires_at IS NOT NULL"
    )
    op.execute("ALTER TABLE agents ADD COLUMN filter_clauses jsonb NOT NULL DEFAULT '[]'")
    op.execute("ALTER TABLE query_log ADD COLUMN filters jsonb")
    # Every clause must hold: {"any": [tags]} (one of them), {"all": [tags]} (each of them),
    # {"key": k, "in": [values]} (attribute k is one of the values; a document without k
    # fails). A plain SQL function, inlined by the planner into the statement that calls it.
    op.execute("""
    CREATE FUNCTION documents_match(tags text[], attributes jsonb, clauses jsonb)
    RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT NOT EXISTS (
            SELECT 1 FROM jsonb_array_elements(clauses) AS c(clause)
            WHERE NOT coalesce(CASE
                WHEN c.clause ? 'any' THEN tags && ARRAY(SELECT jsonb_array_elements_text(c.clause -> 'any'))
                WHEN c.clause ? 'all' THEN tags @> ARRAY(SELECT jsonb_array_elements_text(c.clause -> 'all'))
                ELSE (c.clause -> 'in') ? (attributes ->> (c.clause ->> 'key'))
            END, false)
        )
    $$""")
    op.execute("DROP TRIGGER documents_title_kb_content ON documents")
    op.execute("""
    CREATE TRIGGER documents_title_kb_content
    AFTER UPDATE OF title, tags, attributes, effective_from, expires_at ON documents
    FOR EACH ROW WHEN (
        OLD.title IS DISTINCT FROM NEW.title
        OR OLD.tags IS DISTINCT FROM NEW.tags
        OR OLD.attributes IS DISTINCT FROM NEW.attributes
        OR OLD.effective_from IS DISTINCT FROM NEW.effective_from
        OR OLD.expires_at IS DISTINCT FROM NEW.expires_at
    ) EXECUTE FUNCTION kb_content_of_document()
    """)


def downgrade() -> None:
    op.execute("DROP TRIGGER documents_title_kb_content ON documents")
    op.execute("""
    CREATE TRIGGER documents_title_kb_content AFTER UPDATE OF title ON documents
    FOR EACH ROW WHEN (OLD.title IS DISTINCT FROM NEW.title) EXECUTE FUNCTION kb_content_of_document()
    """)
    op.execute("DROP FUNCTION documents_match(text[], jsonb, jsonb)")
    op.execute("ALTER TABLE query_log DROP COLUMN filters")
    op.execute("ALTER TABLE agents DROP COLUMN filter_clauses")
    op.execute("DROP INDEX ix_documents_window")
    op.execute("""
    ALTER TABLE documents
        DROP CONSTRAINT documents_attributes_check,
        DROP CONSTRAINT documents_window_check,
        DROP COLUMN expires_at,
        DROP COLUMN effective_from,
        DROP COLUMN attributes,
        DROP COLUMN tags
    """)
