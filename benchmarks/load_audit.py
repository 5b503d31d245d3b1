"""The load benchmark's audit and its checks of the model's call records, shared by `benchmarks.load` and its tests.

Every message the load benchmark sends carries a marker `#<session>-u<n>#`, its offline model
(`benchmarks.load_model`) echoes it as `#<session>-a<n>#` and lists in a summary the marker of every folded message.
`audit_phase` reads each session back from the database; the call checks read the model's call records (dicts with
`session`, `pid`, `kind`, `start`, `end` (None: cut off), `failed`, `previous` and `folded` markers).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa

from langflow_summarizing_agent.engine.fold import FOLD_RETRY_BASE
from langflow_summarizing_agent.engine.prompt import count_words
from langflow_summarizing_agent.engine.settings import DEFAULT_FOLD_BATCH, DEFAULT_SUMMARY_WORDS

MARKER = re.compile(r"#(s\d+)-([ua])(\d+)#")
MESSAGES_SQL = (
    "SELECT id, text FROM message WHERE flow_id = :flow_id AND session_id = :session_id "
    # What a fold reads: not the error rows Langflow stores for a failed turn (as during a database restart).
    "AND COALESCE(error, :no) = :no AND COALESCE(category, '') <> 'error' ORDER BY timestamp, id"
)
STATE_SQL = (
    "SELECT session_id, summary, absorbed_count, covered_until_message_id, version, failed_folds "
    "FROM session_memory_state WHERE flow_id = :flow_id"
)
VERSIONS_SQL = (
    "SELECT s.session_id, v.version, v.summary, v.pinned, v.cursor_message_id, v.folded_count, v.change, "
    "v.rolled_back_to FROM session_memory_version v JOIN session_memory_state s ON s.id = v.summary_id "
    "WHERE s.flow_id = :flow_id ORDER BY s.session_id, v.version"
)
VERSIONS_LEFT_SQL = (
    "SELECT count(*) FROM session_memory_version v WHERE NOT EXISTS "
    "(SELECT 1 FROM session_memory_state s WHERE s.id = v.summary_id)"
)
NO_STATE_ROW: Any = SimpleNamespace(summary=None, covered_until_message_id=None, absorbed_count=0, failed_folds=0)
"""The state a session has before its first saved fold."""


def message_marker(text: str | None) -> str | None:
    found = MARKER.search(text or "")
    return f"{found.group(1)}-{found.group(2)}{found.group(3)}" if found else None


def summary_markers(summary: str | None) -> list[str]:
    """The markers a stored summary folds, in order."""
    return [m for m in map(message_marker, (summary or "").splitlines()) if m]


def flow_key(engine: sa.Engine, flow_id: Any) -> Any:
    # SQLite stores UUIDs as 32 hex digits; Postgres has a uuid type.
    as_uuid = uuid.UUID(str(flow_id))
    return as_uuid.hex if engine.dialect.name == "sqlite" else as_uuid


def audit_phase(
    engine: sa.Engine,
    flow_id: Any,
    *,
    versions: dict[str, list[tuple[int, int]]] | None = None,
    delete: Callable[[], list[str]] = list,
    n_messages: int = 10,
    summary_words: int = DEFAULT_SUMMARY_WORDS,
    chatted: Sequence[str] = (),
    rolled_back: Iterable[str] = (),
    versions_kept: int | None = None,
) -> dict[str, Any]:
    """Per session of the flow, from the database: each message the cursor covers folded exactly once and in order,
    `folded_count` the number it covers, no message older than the window left unfolded (unless the fold backs off;
    a session that `chatted` and saved no summary counts as one with an empty summary), and the (version,
    folded_count) pairs polled while the phase ran (`versions`) only going up. Then `delete` deletes sessions
    (returning their ids), and none of them may keep its state row.

    With `versions_kept` (users edited the memory during the phase), each session's kept versions are audited too
    (`version_problems`), and no version may outlive its row; a session in `rolled_back` is audited by its versions
    only: a rollback restores an older summary text by design, so its summary no longer names every covered message."""
    rolled_back = set(rolled_back)
    problems: list[str] = []
    flow, folded, waiting_total = flow_key(engine, flow_id), 0, 0
    with engine.connect() as connection:
        rows = {row.session_id: row for row in connection.execute(sa.text(STATE_SQL), {"flow_id": flow})}
        sessions = {**dict.fromkeys(chatted, NO_STATE_ROW), **rows}
        for session_id, row in sessions.items():
            stored = connection.execute(
                sa.text(MESSAGES_SQL), {"flow_id": flow, "session_id": session_id, "no": False}
            ).all()
            ids = [str(uuid.UUID(str(m.id))) for m in stored]
            cursor = str(uuid.UUID(str(row.covered_until_message_id))) if row.covered_until_message_id else None
            covered = [message_marker(m.text) for m in stored[: ids.index(cursor) + 1]] if cursor in ids else []
            summary = summary_markers(row.summary)
            say = problems.append
            if cursor is not None and cursor not in ids:
                say(f"{session_id}: the cursor names no stored message")
            if len(summary) != len(set(summary)):
                say(f"{session_id}: folded twice: {sorted({m for m in summary if summary.count(m) > 1})}")
            if summary != covered and session_id not in rolled_back:
                clipped = count_words(row.summary or "") >= summary_words
                say(
                    f"{session_id}: the summary folds {len(summary)} messages, the cursor covers {len(covered)}; "
                    f"first difference at {first_difference(summary, covered)}"
                    + (f" (the summary is at the Summary Word Budget, {summary_words} words: clipped)" * clipped)
                )
            if row.absorbed_count != len(covered):
                say(f"{session_id}: folded_count {row.absorbed_count}, the cursor covers {len(covered)}")
            waiting = max(len(stored) - (n_messages - 1) - len(covered), 0)
            if waiting >= DEFAULT_FOLD_BATCH and not row.failed_folds:
                not_folded = "are not folded" if row is not NO_STATE_ROW else "and no summary saved"
                say(f"{session_id}: {waiting} messages older than the window {not_folded}")
            waiting_total, folded = waiting_total + waiting, folded + len(covered)
            seen = (versions or {}).get(session_id, [])
            if [v for v, _ in seen] != sorted({v for v, _ in seen}):
                say(f"{session_id}: the version went down or was saved twice: {seen}")
            if [c for _, c in seen] != sorted(c for _, c in seen):
                say(f"{session_id}: a saved fold was undone: {seen}")
        if versions_kept is not None:
            problems += version_problems(connection, flow, versions_kept)
    deleted = delete()
    with engine.connect() as connection:
        left = {row.session_id for row in connection.execute(sa.text(STATE_SQL), {"flow_id": flow})}
        orphans = int(connection.execute(sa.text(VERSIONS_LEFT_SQL)).scalar_one()) if versions_kept is not None else 0
    problems += [f"{s}: deleted, but its state row is still there" for s in deleted if s in left]
    problems += [f"{orphans} versions outlived their summary row"] if orphans else []
    return {
        "holds": not problems,
        "sessions": len(sessions),
        "deleted_sessions": len(deleted),
        "folded_messages": folded,
        "unfolded_older_messages": waiting_total,
        "problems": problems[:50],
    }


def version_problems(connection: sa.Connection, flow: Any, kept: int) -> list[str]:
    """Each session's kept versions, oldest first, at most `kept`; from one to the next:

    - a fold moves the cursor forward over exactly the messages after the previous cursor, adds their markers after the
      previous summary's, and keeps the pinned facts (the load model pins none: only an edit changes them);
    - an edit or a rollback keeps the cursor and the folded count; a rollback restores its version's text.
    """
    problems: list[str] = []
    chains: dict[str, list[Any]] = {}
    for row in connection.execute(sa.text(VERSIONS_SQL), {"flow_id": flow}):
        chains.setdefault(row.session_id, []).append(row)
    for session_id, versions in chains.items():
        stored = connection.execute(
            sa.text(MESSAGES_SQL), {"flow_id": flow, "session_id": session_id, "no": False}
        ).all()
        position = {str(uuid.UUID(str(m.id))): n for n, m in enumerate(stored)}
        markers = [message_marker(m.text) for m in stored]
        texts = {v.version: v.summary for v in versions}
        say = problems.append
        if len(versions) > kept:
            say(f"{session_id}: {len(versions)} versions kept, more than {kept}")
        for before, after in itertools.pairwise(versions):
            where = f"{session_id}: version {before.version} to {after.version} ({after.change})"
            start, end = (
                -1 if v.cursor_message_id is None else position.get(str(uuid.UUID(str(v.cursor_message_id))))
                for v in (before, after)
            )
            if start is None or end is None:
                say(f"{where}: a cursor names no stored message")
                continue
            if after.change == "fold":
                expected = summary_markers(before.summary) + markers[start + 1 : end + 1]
                if end <= start or summary_markers(after.summary) != expected:
                    say(f"{where}: did not fold exactly the messages after the previous cursor")
                if after.folded_count - before.folded_count != end - start:
                    say(f"{where}: folded_count moved by {after.folded_count - before.folded_count}, not {end - start}")
                if _json(after.pinned) != _json(before.pinned):
                    say(f"{where}: the fold changed the pinned facts")
            elif (end, after.folded_count) != (start, before.folded_count):
                say(f"{where}: the cursor or the folded count moved")
            elif after.change == "rollback" and texts.get(after.rolled_back_to, after.summary) != after.summary:
                say(f"{where}: the text is not version {after.rolled_back_to}'s")
    return problems


def _json(value: Any) -> Any:
    """A JSON column as read through SQL text: parsed already (PostgreSQL) or a string (SQLite)."""
    return json.loads(value) if isinstance(value, str) else value


def first_difference(a: list[Any], b: list[Any]) -> str:
    for n, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"position {n} ({x} against {y})"
    return f"position {min(len(a), len(b))} (one list ends)"


def read_calls(record_path: Path) -> list[dict[str, Any]]:
    """The model's calls: each start record merged with its end record (none: cut off, as by a killed worker)."""
    calls: dict[tuple[int, float, str], dict[str, Any]] = {}
    for line in record_path.read_text(encoding="utf-8").splitlines() if record_path.exists() else []:
        with suppress(ValueError):
            record = json.loads(line)
            call = calls.setdefault((record["pid"], record["start"], record["kind"]), {"end": None, "failed": None})
            call.update({k: v for k, v in record.items() if k != "event"})
    return sorted(calls.values(), key=lambda c: c["start"])


def chain(call: dict[str, Any]) -> list[str]:
    """What a call's summary folds: the previous summary's markers and the ones it folded."""
    return call["previous"] + call["folded"]


def saved(call: dict[str, Any]) -> bool:
    return call["end"] is not None and not call["failed"]


def on_final(call: dict[str, Any], final: dict[str, list[str]]) -> bool:
    """The call's summary is where the session's stored summary (its markers: `final`) begins: its fold was saved."""
    return final.get(call["session"], [])[: len(chain(call))] == chain(call)


def turns_waited(turns: Sequence[Any], calls: Sequence[dict[str, Any]]) -> int:
    """Turns (with `session`, `index`, `start`, `end`) that waited for a summary call: one of the session's, in the
    worker that ran the turn, inside the turn before its first agent call (one in the other worker, or after the
    reply, did not hold the turn up)."""
    first_call = {c["folded"][0]: (c["start"], c["pid"]) for c in calls[::-1] if c["kind"] == "agent" and c["folded"]}
    summary_calls = [c for c in calls if c["kind"] == "summary"]

    def waited(turn: Any) -> bool:
        until, pid = first_call.get(f"{turn.session}-u{turn.index}", (turn.end, None))
        ran = [c for c in summary_calls if c["session"] == turn.session and pid in (None, c["pid"])]
        return any(turn.start <= c["start"] and (c["end"] or turn.end) <= until for c in ran)

    return sum(map(waited, turns))


def fold_queue_waits(turns: Sequence[Any], calls: Sequence[dict[str, Any]]) -> list[float]:
    """For each fold's first summary call (not one folding on from the call before it in the same worker), the wait
    since the end of the session's last turn before it that queued a fold: one that found no fold running, or one
    (`busy`) that found the session's fold running in another worker, which its own fold then follows. A turn that
    found the fold running or waiting in its own worker queued none."""
    worker = {c["folded"][0]: c["pid"] for c in calls if c["kind"] == "agent" and c["folded"]}
    summary_calls = [c for c in calls if c["kind"] == "summary"]

    def queued(turn: Any) -> bool:
        pid = worker.get(f"{turn.session}-u{turn.index}")
        return not turn.busy or any(
            c["session"] == turn.session and c["pid"] != pid and c["start"] <= turn.end <= (c["end"] or math.inf)
            for c in summary_calls
        )

    chains: dict[tuple[str, int], list[str] | None] = {}
    waits, ordered = [], sorted(filter(queued, turns), key=lambda t: t.end)
    for call in summary_calls:
        if chains.get((call["session"], call["pid"])) != call["previous"] or not call["previous"]:
            before = [t for t in ordered if t.session == call["session"] and t.end <= call["start"]]
            waits += [call["start"] - before[-1].end] if before else []
        chains[(call["session"], call["pid"])] = chain(call) if saved(call) else None
    return waits


def most_calls_in_one_fold(summary_calls: Iterable[dict[str, Any]], saved_counts: dict[str, set[int]]) -> int:
    """Most summary calls one fold made. A fold's first call folds on from a saved summary (its previous summary lists
    as many messages as a state row of its session held: `saved_counts`); each next call of the fold, in the same
    worker, folds on from the call before it. A fold queued behind the running one starts from that one's save."""
    most, runs = 0, dict[tuple[str, int], tuple[list[str], int]]()
    for call in summary_calls:
        key = (call["session"], call["pid"])
        before, count = runs.get(key, ([], 0))
        starts = not call["previous"] or len(call["previous"]) in saved_counts.get(call["session"], set())
        count = count + 1 if not starts and before and call["previous"] == before else 1
        runs[key] = (chain(call) if saved(call) else [], count)
        most = max(most, count)
    return most


def retried_within_backoff(summary_calls: list[dict[str, Any]]) -> int:
    """Summary calls that started less than the first back-off after a failed call of the same session, in any
    worker: the back-off did not hold."""
    base = FOLD_RETRY_BASE.total_seconds()
    return sum(
        1
        for failed in summary_calls
        if failed["failed"] and failed["end"] is not None
        if any(
            c["session"] == failed["session"] and failed["end"] < c["start"] < failed["end"] + base
            for c in summary_calls
        )
    )


def rejected_saves(
    summary_calls: list[dict[str, Any]], start: float, end: float, margin: float = 2.0
) -> dict[str, int]:
    """The folds whose save the database rejected between `start` and `end` (the last call of a fold that ended then:
    no call folded on from it), and the summary calls of the same session that started within the first back-off
    after one, in any worker, not folding on from it: a retry the back-off should have held."""
    base = FOLD_RETRY_BASE.total_seconds()
    folds = early = 0
    for last in summary_calls:
        if not saved(last) or not start <= last["end"] <= end - margin:
            continue
        later = [c for c in summary_calls if c["session"] == last["session"] and c["start"] > last["end"]]
        if any(c["previous"] == chain(last) for c in later):
            continue  # the same fold's next batch: the save comes after it
        folds += 1
        early += sum(1 for c in later if c["start"] < last["end"] + base)
    return {"folds": folds, "retried_within_backoff": early}
