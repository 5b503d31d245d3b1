"""What a turn reports, as pure functions of the `Turn` (its read, its plan and its fold) and of the fold that ran
after the previous reply: the component's status, the Playground's memory step, and the `/compact` reply.

None of them shows the summary text or a pinned value: the status and the memory step are shown in the UI, and
the `/compact` reply is stored and shown like any message. Pinned facts appear by key name only. A fold names the
model that made it: Langflow may replace a picked Summary Model whose provider lost its key.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from datetime import datetime

from langflow_summarizing_agent.engine.fold import CatchUp
from langflow_summarizing_agent.engine.plan import COMPACT_FAILED_PREFIX, COMPACT_REPLY_PREFIX
from langflow_summarizing_agent.engine.records import Summary, utcnow
from langflow_summarizing_agent.engine.turn import Turn

BUSY_NOTE = "A fold of this session is running; this turn used the previous summary"
SETTLED_NOTE = "Settings run at the nearest value accepted: "
MEMORY_STEP_ITEM = "\n- "
"""The memory step is a Markdown list, one item a sentence, and an item's detail (an error's text) a list nested
in it: the Playground renders a step's output as Markdown."""
MAX_STEP_LINE = 120
"""Longest line of the memory step. Langflow 1.13's Playground shows a step's output as one scrolling block of
plain code, not as Markdown, when a line is longer than 120 characters or holds a tab or four spaces after text;
so every item is wrapped, its whitespace made single spaces."""
DETAIL_INDENT = "  "
"""A detail's list item sits under its item's text."""

THIS_TURN = "this turn"
AFTER_REPLY = "after the previous reply"

Item = tuple[str, tuple[str, ...]]
"""A memory step item: its sentence, and its details (nested items, each an error's own text)."""


def counted(count: int, noun: str) -> str:
    """`count` and `noun`, plural unless `count` is 1: "1 message", "4 messages"."""
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def problems(turn: Turn) -> tuple[str, ...]:
    """What went wrong: the fold's failures, or the back-off a due fold waits for, and why the last fold failed."""
    if turn.fold is not None:
        return turn.fold.problems
    summary = turn.summary
    if turn.plan.postponed:
        why = f"; the last failure: {summary.fold_failure}" if summary.fold_failure else ""
        return (
            f"fold failed {_times(summary.failed_folds)} in a row; next try after "
            f"{summary.retry_after:%Y-%m-%d %H:%M:%S} UTC{why}",
        )
    return ()


def verbatim_history_tokens(turn: Turn) -> int:
    """Tokens of the whole conversation sent word for word (`Turn.verbatim_history_tokens`, counted once a turn)."""
    return turn.verbatim_history_tokens


def previous_of(turn: Turn, previous: CatchUp | None) -> CatchUp | None:
    """The catch-up after the previous reply, when its summary is the stored summary this turn read: a fold of a
    conversation cleared or deleted since (its row gone, or a new one stored) is not this conversation's to report.
    A fold whose summary has no row (it found none to save to) has nothing of this conversation to report either;
    a back-off it leaves shows in the summary the turn read."""
    if previous is None or previous.summary.row_id is None or previous.summary.row_id != turn.summary.row_id:
        return None
    return previous


def status_text(turn: Turn, previous: CatchUp | None = None, *, name: str = "Summarizing Agent") -> str:
    """The status of the component `name`: what the model got, against sending the whole conversation verbatim,
    then what this turn did. `previous` is the fold that ran after the previous reply, if this process ran one.
    `/compact` calls no model: its status tells what the next turn's model gets."""
    previous = previous_of(turn, previous)
    got = "/compact made no model call; the next turn's model gets" if turn.compaction else "The model got:"
    sentences = [
        f"{got} {_what_was_sent(turn)}, ~{turn.plan.history_tokens:,} tokens (counted in {turn.counter.name})",
        f"Sending the whole conversation verbatim would take ~{verbatim_history_tokens(turn):,} tokens",
    ]
    sentences.extend(_capitalized(note) for note in _window_notes(turn))
    if turn.settled:
        sentences.append(SETTLED_NOTE + "; ".join(turn.settled))
    if previous is not None:
        sentences.append(fold_after_reply_text(previous))
    if _folded(turn):
        sentences.append(f"This turn folded {counted(_folded(turn), 'message')} in {_calls(turn)}{_by(turn.fold)}")
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
    """The Playground's memory step, a Markdown list: counts, the memory version sent and when a user last edited it,
    token estimates, pinned key names, the folds with the model that made them, and why a fold failed, each line at
    most `MAX_STEP_LINE` characters."""
    summary = turn.summary
    previous = previous_of(turn, previous)
    folds = [
        *([_fold_item(previous, AFTER_REPLY)] if previous is not None else []),
        *([_fold_item(turn.fold, THIS_TURN, seconds)] if turn.fold is not None else []),
    ]
    covers = f"summary covers {_earlier(summary.folded_count)}" if summary.folded_count else "no summary yet"
    if summary.folded_count and summary.summary_model and not folds:
        covers += f", last folded by {summary.summary_model}"
    items: list[Item] = [(covers, ()), (_recent(turn), ()), *((note, ()) for note in _window_notes(turn))]
    if turn.settled:
        items.append((SETTLED_NOTE.lower().rstrip(": "), turn.settled))
    pinned = [key for key in pinned_keys if summary.pinned.get(key)]
    if pinned:
        items.append(("pinned: " + ", ".join(pinned), ()))
    items.extend(folds)
    if turn.busy:
        items.append((BUSY_NOTE.lower(), ()))
    if turn.due:
        items.append(("fold runs after this reply", ()))
    if turn.plan.not_summarized:
        items.append((f"{_earlier(turn.plan.not_summarized)} not summarized yet", ()))
    if summary.failed_folds:
        told = any(details for _, details in folds)
        why = (summary.fold_failure,) if summary.fold_failure and not told else ()
        next_try = _next_try(summary.retry_after, now or utcnow())
        items.append((f"fold failed {_times(summary.failed_folds)}; next try {next_try}", why))
    if summary.version:
        items.append((_version(summary), ()))
    items.append((_tokens_sent(turn), ()))
    return "Memory:\n" + "".join(_markdown(item) for item in items)


def fold_after_reply_text(result: CatchUp) -> str:
    """The catch-up after the previous reply, as a sentence of the status."""
    if not result.folded and result.problems:
        return f"The fold after the previous reply failed{_asked(result)}: " + "; ".join(result.problems)
    text = (
        f"Folded after the previous reply: {counted(result.folded, 'message')} "
        f"({_plural_calls(result.calls)}, {result.seconds:.1f} s){_by(result)}"
    )
    return f"{text}; then {'; '.join(result.problems)}" if result.problems else text


def compact_reply_text(turn: Turn | None, pinned_keys: Sequence[str], fallback_note: str | None) -> str:
    if turn is None:
        return f"{COMPACT_REPLY_PREFIX} nothing was folded. {fallback_note or ''}".strip()
    pinned = ", ".join(k for k in pinned_keys if turn.summary.pinned.get(k)) or "none set"
    cut = f", {turn.plan.cut} more cut to fit the History Token Budget" if turn.plan.cut else ""
    covers = (
        f"The summary covers {_earlier(turn.summary.folded_count)}; "
        f"{counted(_verbatim(turn), 'recent message')} stay verbatim{cut}. Pinned: {pinned}."
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


def _fold_item(result: CatchUp, when: str, seconds: float | None = None) -> Item:
    """A fold as a memory step item: what it folded and the model that folded it, or that it failed, with the
    errors' own text as details."""
    if not result.folded and result.problems:
        return f"the fold {when} failed{_asked(result)}", result.problems
    calls = f"({_plural_calls(result.calls)}, {result.seconds if seconds is None else seconds:.1f} s){_by(result)}"
    if when == THIS_TURN:
        return f"folded {counted(result.folded, 'message')} this turn {calls}", result.problems
    return f"folded {when}: {counted(result.folded, 'message')} {calls}", result.problems


def _by(result: CatchUp | None) -> str:
    model = result.model if result is not None else None
    return f", folded by {model}" if model else ""


def _asked(result: CatchUp) -> str:
    return f" (summary model: {result.model})" if result.model else ""


def step_item(sentence: str) -> str:
    """One more item of the memory step, as `memory_step_text` writes its items."""
    return _markdown((sentence, ()))


def _markdown(item: Item) -> str:
    """One item and its details as Markdown list lines, wrapped at `MAX_STEP_LINE`."""
    sentence, details = item
    lines = _wrapped(sentence, "- ", DETAIL_INDENT)
    for detail in details:
        lines += _wrapped(detail, DETAIL_INDENT + "- ", DETAIL_INDENT * 2)
    return "\n" + "\n".join(lines)


def _wrapped(text: str, first: str, later: str) -> list[str]:
    """`text` on lines of at most `MAX_STEP_LINE` characters, its whitespace single spaces and its backticks quotes
    (an error's backticks would open code in Markdown)."""
    flat = " ".join(text.replace("`", "'").split())
    return textwrap.wrap(
        flat, width=MAX_STEP_LINE, initial_indent=first, subsequent_indent=later, break_on_hyphens=False
    ) or [first.rstrip()]


def _tokens_sent(turn: Turn) -> str:
    verbatim = f"the whole conversation verbatim: ~{verbatim_history_tokens(turn):,}"
    if turn.compaction:
        return f"/compact makes no model call and sends no history; {verbatim} tokens"
    return f"~{turn.plan.history_tokens:,} history tokens sent; {verbatim}"


def _window_notes(turn: Turn) -> list[str]:
    """What the History Token Budget took from the window: messages left out, messages cut."""
    plan = turn.plan
    notes = []
    if plan.window_sent < plan.window:
        notes.append(
            f"the last {counted(plan.window, 'message')} did not fit the History Token Budget; "
            f"the newest {plan.window_sent} went"
        )
    if plan.cut:
        notes.append(f"{counted(plan.cut, 'message')} cut to fit the History Token Budget")
    return notes


def _verbatim(turn: Turn) -> int:
    """Messages sent word for word: those sent, less those cut (`Plan.cut`), which are not."""
    return len(turn.plan.send) - turn.plan.cut


def _recent(turn: Turn) -> str:
    """The recent messages sent whole (and cut), and how many of those sent are older than the window, waiting for
    the next fold."""
    plan = turn.plan
    recent = f"{counted(_verbatim(turn), 'recent message')} {'stay ' if turn.compaction else ''}verbatim"
    if plan.cut:
        recent += f" and {plan.cut} cut"
    waiting = len(plan.send) - plan.window_sent
    if waiting > 0 and plan.window_sent:
        return f"{recent}: the last {plan.window_sent} and {waiting} older waiting for the next fold"
    return recent


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]


def _earlier(count: int) -> str:
    return counted(count, "earlier message")


def _version(summary: Summary) -> str:
    """Which version of the session's memory the turn sent, and when a user last edited it."""
    edited = "" if summary.edited_at is None else f", edited by a user {summary.edited_at:%Y-%m-%d %H:%M} UTC"
    return f"memory version {summary.version}{edited}"


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _what_was_sent(turn: Turn) -> str:
    recent = f"{counted(_verbatim(turn), 'recent message')} verbatim"
    if turn.plan.cut:
        recent += f" and {turn.plan.cut} cut"
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
