"""add_session_memory_version

Creates session_memory_version: the summaries a session_memory_state row held, each with the change that made it
(a fold and its cost, or a user's edit, seed or rollback), the newest few per row. Adds session_memory_state.edited_at
and edited_by: when and by whom a user last wrote the row. Rows stored before keep NULL (never edited) and have no
versions until their next change.

Phase: EXPAND

Revision ID: e3b7a9c2d415
Revises: c4a8e2f6d913
Create Date: 2026-12-24 00:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "e3b7a9c2d415"  # pragma: allowlist secret
down_revision: str | None = "c4a8e2f6d913"  # pragma: allowlist secret
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "session_memory_state"
VERSIONS = "session_memory_version"
EDITED = ("edited_at", "edited_by")


def _columns() -> set[str]:
    return {column["name"] for column in sa.inspect(op.get_bind()).get_columns(TABLE)}


def upgrade() -> None:
    # Re-runnable, like the first migration.
    columns = _columns()
    if "edited_at" not in columns:
        op.add_column(TABLE, sa.Column("edited_at", sa.DateTime(timezone=True), nullable=True))
    if "edited_by" not in columns:
        op.add_column(TABLE, sa.Column("edited_by", sa.Uuid(), nullable=True))
    if sa.inspect(op.get_bind()).has_table(VERSIONS):
        return
    op.create_table(
        VERSIONS,
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("summary_id", sa.Uuid(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("pinned", sa.JSON(), nullable=False),
        sa.Column("cursor_message_id", sa.Uuid(), nullable=True),
        sa.Column("cursor_timestamp", sa.DateTime(), nullable=True),
        sa.Column("folded_count", sa.Integer(), nullable=False),
        sa.Column("folded_tokens", sa.Integer(), nullable=True),
        sa.Column("summary_model", sa.String(), nullable=True),
        sa.Column("change", sa.String(), nullable=False),
        sa.Column("changed_by", sa.Uuid(), nullable=True),
        sa.Column("fold_calls", sa.Integer(), nullable=False),
        sa.Column("fold_input_tokens", sa.Integer(), nullable=False),
        sa.Column("fold_output_tokens", sa.Integer(), nullable=False),
        sa.Column("fold_cached_tokens", sa.Integer(), nullable=True),
        sa.Column("folded_messages", sa.Integer(), nullable=False),
        sa.Column("folded_messages_tokens", sa.Integer(), nullable=False),
        sa.Column("rolled_back_to", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_session_memory_version"),
        # Leads with summary_id, so it also serves the reads, the trim and the purge of one row's versions.
        sa.UniqueConstraint("summary_id", "version", name="uq_session_memory_version"),
    )


def downgrade() -> None:
    if sa.inspect(op.get_bind()).has_table(VERSIONS):
        op.drop_table(VERSIONS)
    columns = _columns()
    dropped = [name for name in EDITED if name in columns]
    if dropped:
        with op.batch_alter_table(TABLE) as batch:
            for name in dropped:
                batch.drop_column(name)
