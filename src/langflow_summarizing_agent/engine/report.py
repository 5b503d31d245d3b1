"""What a turn reports, as pure functions of the `Turn` (its read, its plan and its fold) and of the fold that ran
after the previous reply: the component's status, the Playground's memory step, and the `/compact` reply.

None of them shows the summary text or a pinned value: the status and the memory step are shown in the UI, and
the `/compact` reply is stored and shown like any message. Pinned facts appear by key name only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from langflow_summarizing_agent.engine.fold import CatchUp
from langflow_summarizing_agent.engine.plan import COMPACT_FAILED_PREFIX, COMPACT_REPLY_PREFIX
from langflow_summarizing_agent.engine.records import utcnow
from langflow_summarizing_agent.engine.turn import Turn

BUSY_NOTE = "A fold of this session is running; this turn used the previous summary"
MEMORY_STEP_ITEM = "\n- "
"""The memory step is a Markdown list, one item a line: the Playground renders a step's output as Markdown."""


def counted(count: int, noun: str) -> str:
    """`count` and `noun`, plural unless `count` is 1: "1 message", "4 messages"."""
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def problems(turn: Turn) -> tuple[str, ...]:
    """What went wrong: the fold's failures, or the back-off a due fold waits for."""
    if turn.fold is not None:
        return turn.fold.problems
    summary = turn.summary
    if turn.plan.postponed:
        return (
            f"fold failed {_times(summary.failed_folds)} in a row; next try after "
            f"{summary.retry_after:%Y-%m-%d %H:%M:%S} UTC",
        )
    return ()


def verbatim_history_tokens(turn: Turn) -> int:
    """Tokens of the whole conversation sent word for word (`Turn.verbatim_history_tokens`, counted once a turn)."""
    return turn.verbatim_history_tokens


def previous_of(turn: Turn, previous: CatchUp | None) -> CatchUp | None:
    """The fold after the previous reply, when its summary is the stored summary this turn read: a fold of a
    conversation cleared or deleted since (its row gone, or a new one stored) is not this conversation's to report.
    A fold whose summary has no row (it found none to save to) has nothing of this conversation to report either;
    a back-off it leaves shows in the summary the turn read."""
    if previous is None or previous.summary.row_id is None or previous.summary.row_id != turn.summary.row_id:
        return None
    return previous


def status_text(turn: Turn, previous: CatchUp | None = None, *, name: str = "Summarizing Agent") -> str:
    """The status of the component `name`: what the model got, against sending the whole conversation verbatim,
    then what this turn did. `previous` is the fold that ran after the previous reply, if this process ran one."""
    previous = previous_of(turn, previous)
    sentences = [
        f"The model got: {_what_was_sent(turn)}, ~{turn.plan.history_tokens:,} tokens (counted in {turn.counter.name})",
        f"Sending the whole conversation verbatim would take ~{verbatim_history_tokens(turn):,} tokens",
    ]
    sentences.extend(_window_notes(turn))
    if previous is not None:
        sentences.append(fold_after_reply_text(previous))
    if _folded(turn):
        sentences.append(f"This turn folded {counted(_folded(turn), 'message')} in {_calls(turn)}")
    if turn.busy:
        sentences.append(BUSY_NOTE)
    if turn.due:
        sentences.append(f"A fold is due ({turn.due}); it runs after this reply")
    if turn.plan.not_summarized:
        sentences.append(f"{_earlier(turn.plan.not_summarized)} not summarized yet")
    if problems(turn):
        sentences.append("Problems: " + "; ".join(problems(turn)))
    return f"{name}. " + ". ".join(sentences) + "."


def memory_step_text(
    turn: Turn,
    pinned_keys: Sequence[str],
    seconds: float,
    now: datetime | None = None,
    previous: CatchUp | None = None,
) -> str:
    """The Playground's memory step, one item a line: counts, token estimates and pinned key names."""
    summary = turn.summary
    previous = previous_of(turn, previous)
    items = [
        f"summary covers {_earlier(summary.folded_count)}" if summary.folded_count else "no summary yet",
        _recent(turn),
        *(note[0].lower() + note[1:] for note in _window_notes(turn)),
    ]
    pinned = [key for key in pinned_keys if summary.pinned.get(key)]
    if pinned:
        items.append("pinned: " + ", ".join(pinned))
    if previous is not None:
        items.append(fold_after_reply_text(previous).lower())
    if _folded(turn):
        items.append(f"folded {counted(_folded(turn), 'message')} this turn ({_calls(turn)}, {seconds:.1f} s)")
    if turn.busy:
        items.append(BUSY_NOTE.lower())
    if turn.due:
        items.append("fold runs after this reply")
    if turn.plan.not_summarized:
        items.append(f"{_earlier(turn.plan.not_summarized)} not summarized yet")
    if summary.failed_folds:
        items.append(
            f"fold failed {_times(summary.failed_folds)}; next try {_next_try(summary.retry_after, now or utcnow())}"
        )
    items.append(
        f"~{turn.plan.history_tokens:,} history tokens sent; the whole conversation verbatim: "
        f"~{verbatim_history_tokens(turn):,}"
    )
    return "Memory:\n" + "".join(MEMORY_STEP_ITEM + item for item in items)


def fold_after_reply_text(result: CatchUp) -> str:
    if result.problems:
        return "The fold after the previous reply failed: " + "; ".join(result.problems)
    return (
        f"Folded after the previous reply: {counted(result.folded, 'message')} "
        f"({_plural_calls(result.calls)}, {result.seconds:.1f} s)"
    )


def compact_reply_text(turn: Turn | None, pinned_keys: Sequence[str], fallback_note: str | None) -> str:
    if turn is None:
        return f"{COMPACT_REPLY_PREFIX} nothing was folded. {fallback_note or ''}".strip()
    pinned = ", ".join(k for k in pinned_keys if turn.summary.pinned.get(k)) or "none set"
    covers = (
        f"The summary covers {_earlier(turn.summary.folded_count)}; "
        f"{counted(len(turn.plan.send), 'recent message')} stay verbatim. Pinned: {pinned}."
    )
    if problems(turn):
        return f"{COMPACT_FAILED_PREFIX} nothing was folded ({'; '.join(problems(turn))}). {covers}"
    if turn.busy:
        return f"{COMPACT_FAILED_PREFIX} a fold of this session is running; try again when it ends. {covers}"
    if _folded(turn):
        outcome = f"folded {counted(_folded(turn), 'message')} into the summary"
    else:
        outcome = "nothing older than the recent window to fold"
    return f"{COMPACT_REPLY_PREFIX} {outcome}. {covers}"


def _window_notes(turn: Turn) -> list[str]:
    """What the History Token Budget took from the window: messages left out, messages cut."""
    plan = turn.plan
    notes = []
    if plan.window_sent < plan.window:
        notes.append(
            f"The last {counted(plan.window, 'message')} did not fit the History Token Budget; "
            f"the newest {plan.window_sent} went"
        )
    if plan.cut:
        notes.append(f"{counted(plan.cut, 'message')} cut to fit the History Token Budget")
    return notes


def _recent(turn: Turn) -> str:
    """The recent messages sent, and how many of them are older than the window, waiting for the next fold."""
    plan = turn.plan
    recent = f"{counted(len(plan.send), 'recent message')} verbatim"
    waiting = len(plan.send) - plan.window_sent
    if waiting > 0 and plan.window_sent:
        return f"{recent}: the last {plan.window_sent} and {waiting} older waiting for the next fold"
    return recent


def _earlier(count: int) -> str:
    return counted(count, "earlier message")


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _what_was_sent(turn: Turn) -> str:
    recent = f"{counted(len(turn.plan.send), 'recent message')} verbatim"
    if not turn.summary.folded_count:
        return f"no summary yet, {recent}"
    return f"summary covering {counted(turn.summary.folded_count, 'message')} plus {recent}"


def _folded(turn: Turn) -> int:
    return turn.fold.folded if turn.fold is not None else 0


def _calls(turn: Turn) -> str:
    return _plural_calls(turn.fold.calls if turn.fold is not None else 0)


def _plural_calls(count: int) -> str:
    return counted(count, "summary call")


def _next_try(retry_after: datetime | None, now: datetime) -> str:
    if retry_after is None or retry_after <= now:
        return "on the next turn"
    seconds = (retry_after - now).total_seconds()
    if seconds < 60:
        return f"in {math.ceil(seconds)} s"
    if seconds < 3600:
        return f"in {math.ceil(seconds / 60)} min"
    return f"in {math.ceil(seconds / 3600)} h"
