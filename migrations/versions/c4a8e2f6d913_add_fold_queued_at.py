"""add_fold_queued_at

Adds session_memory_state.fold_queued_at: when a fold after the reply was queued for the row's scope, until that
fold ends, so a read or reset through the session summary API in another worker or server waits for it. Rows
stored before keep NULL (no fold queued).

Phase: EXPAND

Revision ID: c4a8e2f6d913
Revises: 5b7d9e1f3a42
Create Date: 2026-12-20 00:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "c4a8e2f6d913"  # pragma: allowlist secret
down_revision: str | None = "5b7d9e1f3a42"  # pragma: allowlist secret
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "session_memory_state"
COLUMN = "fold_queued_at"


def _columns() -> set[str]:
    return {column["name"] for column in sa.inspect(op.get_bind()).get_columns(TABLE)}


def upgrade() -> None:
    # Re-runnable, like the first migration.
    columns = _columns()
    if COLUMN not in columns:
        op.add_column(TABLE, sa.Column(COLUMN, sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    columns = _columns()
    if COLUMN in columns:
        with op.batch_alter_table(TABLE) as batch:
            batch.drop_column(COLUMN)
