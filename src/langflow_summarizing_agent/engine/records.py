"""What the engine reads and writes: messages as stored, the cursor, the session's summary, and its scope."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal
from uuid import UUID

Role = Literal["user", "assistant"]
Id = str | UUID

NO_CONTEXT = ""
"""The context of a session without one. NULLs are distinct in unique constraints on SQLite and PostgreSQL; an empty
string keeps one summary per session."""


def utcnow() -> datetime:
    """The package's one clock: an aware UTC datetime."""
    return datetime.now(timezone.utc)


def as_utc(value: datetime) -> datetime:
    """`value` as an aware UTC datetime; a naive value is taken as UTC (what the database stores)."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


@dataclass(frozen=True, order=True)
class Cursor:
    """The last message folded into the summary, ordered like Langflow's keyset reads: `(timestamp, id)`."""

    timestamp: datetime
    message_id: str


@dataclass(frozen=True)
class StoredMessage:
    """A chat message as stored by Langflow, reduced to what a plan and a fold need.

    `payload` carries the stored row, handed to the Agent unchanged when the message goes word for word.
    """

    id: str
    timestamp: datetime
    role: Role
    text: str
    payload: Any = None
    files: tuple[str, ...] = ()
    """Names of the files attached to the message."""

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.timestamp, self.id)


@dataclass(frozen=True)
class Summary:
    """What is stored per session: the summary text, the pinned facts and the cursor of the last folded message.

    `row_id` and `version` identify what was read: version 0 (no `row_id`) means nothing is stored. A save names
    both, so a save from a summary that was reset or purged since (and maybe stored anew: a new row has a new id)
    never succeeds: the pair never repeats for a scope. `failed_folds`, `retry_after` and `fold_failure` are the
    back-off of a summary model (or a save) that keeps failing, and why the last fold failed.
    """

    text: str = ""
    pinned: dict[str, str] = field(default_factory=dict)
    cursor: Cursor | None = None
    folded_count: int = 0
    """Messages the summary covers."""
    folded_tokens: int | None = 0
    """Tokens of the messages the summary covers, counted as each fold counted them; None for a summary stored
    before they were counted (its folded messages are then estimated)."""
    summary_model: str | None = None
    version: int = 0
    failed_folds: int = 0
    retry_after: datetime | None = None
    fold_failure: str | None = None
    """Why the last fold failed, in a few words (`engine.fold.FAILURE_CHARS` at most), until a fold succeeds: shown
    in the UI, so it never holds summary text nor a pinned value."""
    updated_at: datetime | None = None
    row_id: str | None = None
    edited_at: datetime | None = None
    """When a user last wrote the summary or its pinned facts (an edit, a seed or a rollback); None if never."""
    edited_by: str | None = None
    """Who did: the Langflow user's id."""

    def covers(self, message: StoredMessage) -> bool:
        """True when `message` is at or before the cursor, that is already folded."""
        return self.cursor is not None and message.cursor <= self.cursor

    def emptied(self) -> Summary:
        """A summary with nothing folded that a save can still compare-and-swap against this one's row."""
        return Summary(version=self.version, row_id=self.row_id, updated_at=self.updated_at)


ChangeKind = Literal["fold", "edit", "seed", "rollback"]
CHANGE_KINDS: tuple[ChangeKind, ...] = ("fold", "edit", "seed", "rollback")


@dataclass(frozen=True)
class Change:
    """What made a saved summary: a catch-up's folds, with what they cost, or a user's edit, seed or rollback.

    A save given a change keeps the summary it stores as a version (`storage.versions`); a save without one (the
    back-off of a failed fold) keeps none."""

    kind: ChangeKind
    by: str | None = None
    """The user who edited, seeded or rolled back; None for a fold."""
    calls: int = 0
    """Summary calls the folds made."""
    input_tokens: int = 0
    """Tokens of the fold prompts, as the turn's counter counts them."""
    output_tokens: int = 0
    """Tokens of the summary model's answers, counted the same way."""
    cached_tokens: int | None = None
    """Of the input tokens, those the provider reported read from its prompt cache; None when it reported none."""
    messages: int = 0
    """Messages folded."""
    tokens: int = 0
    """Tokens of the messages folded."""
    rolled_back_to: int | None = None
    """The version a rollback restored."""


ScopeKey = tuple[str, str, str, str]
"""A `Scope.key`: flow, owner, session and context, as strings; what this process keys a session's fold lock, usage,
back-off and catch-up after the reply on."""


@dataclass(frozen=True)
class Scope:
    """Whose summary: one flow, one owner, one session and one context (`None`: every context of the session, read
    as Langflow's `aget_messages()` reads them; stored as `NO_CONTEXT`)."""

    flow_id: Id | None
    user_id: Id | None
    session_id: str
    context_id: str | None = None

    def __post_init__(self) -> None:
        # `""` is how the canvas and the table say "no context": the same scope as None.
        if self.context_id == NO_CONTEXT:
            object.__setattr__(self, "context_id", None)

    @property
    def key(self) -> ScopeKey:
        """The scope as a hashable value of strings (`ScopeKey`)."""
        return (str(self.flow_id), str(self.user_id), self.session_id, self.context_id or NO_CONTEXT)
