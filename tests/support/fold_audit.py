"""What many concurrent runs on one session must leave behind, read from the database: one summary row, each folded
message named once, the cursor at the newest, versions only going up (in-process runs and two workers alike)."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import sqlalchemy as sa

from tests.support.fake_chat_model import folded_texts

# A small window and batch make nearly every turn fold, so concurrent turns race on the same summary row.
FOLD_OFTEN = {
    "summarize_older_messages": True,
    "n_messages": 2,
    "fold_batch": 2,
    "history_token_budget": 0,
    # The summary model lists every folded message; a budget of 300 words would clip that list and lose names.
    "summary_words": 5000,
}

SUMMARY_SQL = """
SELECT version, absorbed_count, summary, covered_until_message_id
FROM session_memory_state WHERE flow_id = :flow_id AND session_id = :session_id
"""
MESSAGE_SQL = "SELECT sender, text FROM message WHERE id = :id"


def check_fold_bookkeeping(engine: sa.Engine, flow_id: uuid.UUID, session_id: str) -> dict[str, Any]:
    """One summary row; its summary, written by a model that lists every message it folds, names each folded message
    once; `absorbed_count` is their number and the cursor is the newest of them."""
    ids = {"flow_id": _id(engine, flow_id), "session_id": session_id}
    with engine.connect() as connection:
        rows = connection.execute(sa.text(SUMMARY_SQL), ids).mappings().all()
        assert len(rows) == 1, f"expected one summary row, found {len(rows)}"
        row = dict(rows[0])
        assert row["covered_until_message_id"] is not None, "nothing was folded"
        cursor = connection.execute(sa.text(MESSAGE_SQL), {"id": _id(engine, row["covered_until_message_id"])}).one()
    folded = folded_texts(row["summary"])
    # A reply is stored empty while its run is still streaming; a fold may read it then.
    texts = [text for text in folded if text.strip()]
    assert len(texts) == len(set(texts)), f"a message was folded twice: {folded}"
    assert row["absorbed_count"] == len(folded), f"absorbed {row['absorbed_count']}, folded {folded}"
    assert cursor.text.strip() == folded[-1].strip() or (not folded[-1].strip() and cursor.sender != "User"), (
        f"the cursor is at {cursor.text!r}, the newest folded message is {folded[-1]!r}"
    )
    return row


def _id(engine: sa.Engine, value: Any) -> Any:
    # SQLite stores UUIDs as 32 hex digits without dashes; Postgres has a uuid type.
    as_uuid = value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    return as_uuid.hex if engine.dialect.name == "sqlite" else as_uuid


class SummaryWatch:
    """Polls the summary row in a thread while runs are in flight; `seen` keeps each (version, absorbed_count)."""

    def __init__(self, engine: sa.Engine, flow_id: uuid.UUID, session_id: str) -> None:
        self.engine = engine
        self.ids = {"flow_id": _id(engine, flow_id), "session_id": session_id}
        self.seen: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> SummaryWatch:
        self._read()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._read()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._read()
            time.sleep(0.005)

    def _read(self) -> None:
        with self.engine.connect() as connection:
            row = connection.execute(sa.text(SUMMARY_SQL), self.ids).first()
        if row is not None and (not self.seen or self.seen[-1] != (row.version, row.absorbed_count)):
            self.seen.append((row.version, row.absorbed_count))

    def assert_only_moved_forward(self, final: dict[str, Any]) -> None:
        """Each save bumped the version, and none undid a fold saved before it."""
        versions = [version for version, _ in self.seen]
        assert versions == sorted(set(versions)), f"the version went down or was saved twice: {self.seen}"
        absorbed = [count for _, count in self.seen]
        assert absorbed == sorted(absorbed), f"a saved fold was undone: {self.seen}"
        assert self.seen[-1] == (final["version"], final["absorbed_count"])
        assert len(self.seen) > 1, "no summary was saved while the runs were in flight"
