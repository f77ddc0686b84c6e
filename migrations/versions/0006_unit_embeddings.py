"""Hold chunk embeddings to unit length, so exact search can rank by inner product.

Exact search compares every embedding of the agent's KBs. pgvector's cosine distance
(`<=>`) computes a dot product and both vectors' norms: three multiply-adds per dimension.
For unit vectors it equals 1 + the negative inner product (`<#>`), one multiply-add per
dimension: 0.8 against 1.6 ms for a 1,000-chunk KB at 512 dimensions (docs/BENCHMARKS.md).

Every embedder has returned L2-normalised vectors since the first ingestion
(app/embeddings/base.normalise_rows), so existing rows already hold. Any row written by
other means is normalised here first; a zero vector, which no embedder returns, would stop
the migration at the check, not be ranked wrongly. The check costs one inner product per
inserted row; it is added NOT VALID and then validated, which does not block writers.

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A float4 vector normalised in float8 is within ~1e-6 of unit length; 1e-3 leaves room for
# any embedder's rounding while still catching an unnormalised vector.
UNIT = "abs(1 + (embedding <#> embedding)) <= 1e-3"


def upgrade() -> None:
    # pgvector 0.6 has no l2_normalize(): scale through the real[] cast.
    op.execute(f"""
    UPDATE chunks SET embedding = (
        SELECT array_agg(x / sqrt(-(embedding <#> embedding)) ORDER BY i)
        FROM unnest(embedding::real[]) WITH ORDINALITY AS u(x, i)
    )::vector
    WHERE NOT ({UNIT}) AND (embedding <#> embedding) < 0
    """)
    op.execute(f"ALTER TABLE chunks ADD CONSTRAINT ck_chunks_unit_embedding CHECK ({UNIT}) NOT VALID")
    op.execute("ALTER TABLE chunks VALIDATE CONSTRAINT ck_chunks_unit_embedding")


def downgrade() -> None:
    op.execute("ALTER TABLE chunks DROP CONSTRAINT ck_chunks_unit_embedding")
