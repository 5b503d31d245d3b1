"""create_session_memory_state

Creates the session_memory_state table (one row of memory per flow, owner, session and context) and its
unique scope key. The key leads with flow_id, so it also serves purges by flow.

Phase: EXPAND

Revision ID: 3f9c1a7e5b20
Revises:
Create Date: 2026-11-30 00:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "3f9c1a7e5b20"  # pragma: allowlist secret
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "session_memory_state"


def upgrade() -> None:
    # Re-runnable: a database whose version table was lost keeps its rows.
    if sa.inspect(op.get_bind()).has_table(TABLE):
        return
    op.create_table(
        TABLE,
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("flow_id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("session_id", sa.String(), nullable=False),
        # "No context" is '' rather than NULL: NULLs are distinct in unique constraints.
        sa.Column("context_id", sa.String(), nullable=False, server_default=sa.text("''")),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("pinned", sa.JSON(), nullable=False),
        sa.Column("covered_until_message_id", sa.Uuid(), nullable=True),
        # Same type as message.timestamp, so the keyset cursor compares like with like.
        sa.Column("covered_until_timestamp", sa.DateTime(), nullable=True),
        sa.Column("absorbed_count", sa.Integer(), nullable=False),
        sa.Column("summary_model", sa.String(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("failed_folds", sa.Integer(), nullable=False),
        sa.Column("retry_after", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_session_memory_state"),
        sa.UniqueConstraint("flow_id", "user_id", "session_id", "context_id", name="uq_session_memory_state_scope"),
    )


def downgrade() -> None:
    if not sa.inspect(op.get_bind()).has_table(TABLE):
        return
    op.drop_table(TABLE)
