"""add_folded_tokens

Adds session_memory_state.folded_tokens: the tokens of the messages a summary covers, so the memory step can
compare what the model gets with the whole conversation, folded messages included. Rows stored before keep NULL
(their folded messages are estimated).

Phase: EXPAND

Revision ID: 8d2e4b6a1c37
Revises: 3f9c1a7e5b20
Create Date: 2026-12-04 00:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "8d2e4b6a1c37"  # pragma: allowlist secret
down_revision: str | None = "3f9c1a7e5b20"  # pragma: allowlist secret
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "session_memory_state"
COLUMN = "folded_tokens"


def _columns() -> set[str]:
    return {column["name"] for column in sa.inspect(op.get_bind()).get_columns(TABLE)}


def upgrade() -> None:
    # Re-runnable, like the first migration.
    columns = _columns()
    if COLUMN not in columns:
        op.add_column(TABLE, sa.Column(COLUMN, sa.Integer(), nullable=True))


def downgrade() -> None:
    columns = _columns()
    if COLUMN in columns:
        with op.batch_alter_table(TABLE) as batch:
            batch.drop_column(COLUMN)
