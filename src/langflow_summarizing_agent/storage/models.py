"""The `session_memory_state` table: one row per session scope, holding its summary; and `session_memory_version`:
the summaries a row held, newest `versions.DEFAULT_VERSIONS_KEPT` per row, each with what made it.

The model lives in its own SQLModel registry, so its table is not in Langflow's `SQLModel.metadata`: Langflow
refuses to start when its metadata holds a table its own migrations do not create. This package's Alembic
environment (`migrations/`) creates the table instead.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID, uuid4

from sqlalchemy import JSON, Column, DateTime, Integer, String, Text, UniqueConstraint, Uuid, text
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

from langflow_summarizing_agent.engine.records import NO_CONTEXT, utcnow

TABLE_NAME = "session_memory_state"
VERSION_TABLE_NAME = "session_memory_version"
VERSION_CONSTRAINT = "uq_session_memory_version"
SCOPE_CONSTRAINT = "uq_session_memory_state_scope"
SCOPE_COLUMNS = ("flow_id", "user_id", "session_id", "context_id")


class Base(SQLModel, registry=registry()):
    """Root of this package's tables, with a metadata of its own (kept out of Langflow's migration check)."""


class SessionMemoryStateTable(Base, table=True):
    """Summary, pinned facts and fold cursor of one `(flow_id, user_id, session_id, context_id)` scope.

    Three columns keep the names of the first migration (`covered_until_message_id`, `covered_until_timestamp`,
    `absorbed_count`); code reads them as `cursor_message_id`, `cursor_timestamp` and `folded_count` (the column
    keys), so renaming them would change only the database.

    `cursor_timestamp` is naive UTC. It is never compared with `message.timestamp` column to column (a
    timestamptz on PostgreSQL): reads bind it as an aware value, or take the cursor message's own timestamp.
    """

    __tablename__ = TABLE_NAME
    # The unique key leads with flow_id, so it also serves the purge by flow; no separate flow_id index.
    __table_args__ = (UniqueConstraint(*SCOPE_COLUMNS, name=SCOPE_CONSTRAINT),)

    id: UUID = Field(default_factory=uuid4, primary_key=True)
    flow_id: UUID = Field(nullable=False)
    user_id: UUID = Field(nullable=False)
    session_id: str = Field(sa_column=Column(String, nullable=False))
    context_id: str = Field(default=NO_CONTEXT, sa_column=Column(String, nullable=False, server_default=text("''")))
    summary: str = Field(default="", sa_column=Column(Text, nullable=False))
    pinned: dict[str, str] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    cursor_message_id: UUID | None = Field(
        default=None, sa_column=Column("covered_until_message_id", Uuid, key="cursor_message_id", nullable=True)
    )
    cursor_timestamp: datetime | None = Field(
        default=None, sa_column=Column("covered_until_timestamp", DateTime(), key="cursor_timestamp", nullable=True)
    )
    folded_count: int = Field(
        default=0, sa_column=Column("absorbed_count", Integer, key="folded_count", nullable=False)
    )
    folded_tokens: int | None = Field(default=0, sa_column=Column(Integer, nullable=True))
    """None in a row stored before the tokens of folded messages were counted."""
    summary_model: str | None = Field(default=None, sa_column=Column(String, nullable=True))
    version: int = Field(default=1, sa_column=Column(Integer, nullable=False))
    failed_folds: int = Field(default=0, sa_column=Column(Integer, nullable=False))
    retry_after: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True), nullable=True))
    fold_failure: str | None = Field(default=None, sa_column=Column(String, nullable=True))
    """Why the last fold failed, until a fold succeeds; NULL in a row stored before it was kept."""
    fold_queued_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True), nullable=True))
    """When a catch-up after the reply was queued for the scope, until it ends: the API's reads in any worker wait."""
    edited_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True), nullable=True))
    """When a user last wrote the summary or its pinned facts (edit, seed, rollback); NULL if never."""
    edited_by: UUID | None = Field(default=None, sa_column=Column(Uuid, nullable=True))
    created_at: datetime = Field(default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False))
    updated_at: datetime = Field(default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False))


class SessionMemoryVersionTable(Base, table=True):
    """One summary a `session_memory_state` row held (its `version`), with the change that made it: a fold and what
    it cost, or a user's edit, seed or rollback. Deleted with its row; the oldest beyond the number kept are deleted
    as new ones come."""

    __tablename__ = VERSION_TABLE_NAME
    __table_args__ = (UniqueConstraint("summary_id", "version", name=VERSION_CONSTRAINT),)

    id: UUID = Field(default_factory=uuid4, primary_key=True)
    summary_id: UUID = Field(nullable=False)
    """The `session_memory_state` row."""
    version: int = Field(sa_column=Column(Integer, nullable=False))
    summary: str = Field(default="", sa_column=Column(Text, nullable=False))
    pinned: dict[str, str] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    cursor_message_id: UUID | None = Field(default=None, sa_column=Column(Uuid, nullable=True))
    cursor_timestamp: datetime | None = Field(default=None, sa_column=Column(DateTime(), nullable=True))
    folded_count: int = Field(default=0, sa_column=Column(Integer, nullable=False))
    folded_tokens: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    summary_model: str | None = Field(default=None, sa_column=Column(String, nullable=True))
    change: str = Field(sa_column=Column(String, nullable=False))
    """fold, edit, seed or rollback; `recorded` for a summary stored before versions were kept."""
    changed_by: UUID | None = Field(default=None, sa_column=Column(Uuid, nullable=True))
    fold_calls: int = Field(default=0, sa_column=Column(Integer, nullable=False))
    fold_input_tokens: int = Field(default=0, sa_column=Column(Integer, nullable=False))
    fold_output_tokens: int = Field(default=0, sa_column=Column(Integer, nullable=False))
    fold_cached_tokens: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    folded_messages: int = Field(default=0, sa_column=Column(Integer, nullable=False))
    """Messages this change folded (a fold's; 0 for a user's change)."""
    folded_messages_tokens: int = Field(default=0, sa_column=Column(Integer, nullable=False))
    rolled_back_to: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    created_at: datetime = Field(default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False))
