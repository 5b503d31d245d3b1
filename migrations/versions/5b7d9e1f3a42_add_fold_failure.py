"""add_fold_failure

Adds session_memory_state.fold_failure: why the last fold failed, in a few words, kept until a fold succeeds, so
the memory step of a later turn (in any worker) still says why folds fail. Rows stored before keep NULL.

Phase: EXPAND

Revision ID: 5b7d9e1f3a42
Revises: 8d2e4b6a1c37
Create Date: 2026-12-10 00:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "5b7d9e1f3a42"  # pragma: allowlist secret
down_revision: str | None = "8d2e4b6a1c37"  # pragma: allowlist secret
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "session_memory_state"
COLUMN = "fold_failure"


def _columns() -> set[str]:
    return {column["name"] for column in sa.inspect(op.get_bind()).get_columns(TABLE)}


def upgrade() -> None:
    # Re-runnable, like the first migration.
    columns = _columns()
    if COLUMN not in columns:
        op.add_column(TABLE, sa.Column(COLUMN, sa.String(), nullable=True))


def downgrade() -> None:
    columns = _columns()
    if COLUMN in columns:
        with op.batch_alter_table(TABLE) as batch:
            batch.drop_column(COLUMN)
