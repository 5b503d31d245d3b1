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
from langflow_summarizing_agent.engine.plan import COMPACT_REPLY_PREFIX
from langflow_summarizing_agent.engine.records import utcnow
from langflow_summarizing_agent.engine.turn import Turn

BUSY_NOTE = "A fold of this session is running; this turn used the previous summary"
MEMORY_STEP_SEPARATOR = "\n· "
"""Several lines: the Playground shows such a step text as wrapped prose, and a single line in a box that does not
wrap."""


def problems(turn: Turn) -> tuple[str, ...]:
    """What went wrong: the fold's failures, or the back-off a due fold waits for."""
    if turn.fold is not None:
        return turn.fold.problems
    summary = turn.summary
    if turn.plan.postponed:
        return (
            f"fold failed {summary.failed_folds} time(s) in a row; next try after "
            f"{summary.retry_after:%Y-%m-%d %H:%M:%S} UTC",
        )
    return ()


def verbatim_history_tokens(turn: Turn) -> int:
    """Tokens of the whole conversation sent word for word (`Turn.verbatim_history_tokens`, counted once a turn)."""
    return turn.verbatim_history_tokens


def status_text(turn: Turn, previous: CatchUp | None = None, *, name: str = "Summarizing Agent") -> str:
    """The status of the component `name`: what the model got, against sending the whole conversation verbatim,
    then what this turn did. `previous` is the fold that ran after the previous reply, if this process ran one."""
    sentences = [
        f"The model got: {_what_was_sent(turn)}, ~{turn.plan.history_tokens:,} tokens (counted in {turn.counter.name})",
        f"Sending the whole conversation verbatim would take ~{verbatim_history_tokens(turn):,} tokens",
    ]
    if previous is not None:
        sentences.append(fold_after_reply_text(previous))
    if _folded(turn):
        sentences.append(f"This turn folded {_folded(turn)} messages in {_calls(turn)}")
    if turn.busy:
        sentences.append(BUSY_NOTE)
    if turn.due:
        sentences.append(f"A fold is due ({turn.due}); it runs after this reply")
    if turn.plan.not_summarized:
        sentences.append(f"{turn.plan.not_summarized} earlier messages are not summarized yet")
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
    """The Playground's memory step: counts, token estimates and pinned key names."""
    summary = turn.summary
    parts = [
        f"summary covers {summary.folded_count} earlier messages" if summary.folded_count else "no summary yet",
        f"{len(turn.plan.send)} recent messages verbatim",
    ]
    pinned = [key for key in pinned_keys if summary.pinned.get(key)]
    if pinned:
        parts.append("pinned: " + ", ".join(pinned))
    if previous is not None:
        parts.append(fold_after_reply_text(previous).lower())
    if _folded(turn):
        parts.append(f"folded {_folded(turn)} messages this turn ({_calls(turn)}, {seconds:.1f} s)")
    if turn.busy:
        parts.append(BUSY_NOTE.lower())
    if turn.due:
        parts.append("fold runs after this reply")
    if turn.plan.not_summarized:
        parts.append(f"{turn.plan.not_summarized} earlier messages not summarized yet")
    if summary.failed_folds:
        times = "once" if summary.failed_folds == 1 else f"{summary.failed_folds} times"
        parts.append(f"fold failed {times}; next try {_next_try(summary.retry_after, now or utcnow())}")
    parts.append(
        f"~{turn.plan.history_tokens:,} history tokens sent; the whole conversation verbatim: "
        f"~{verbatim_history_tokens(turn):,}"
    )
    return "Memory: " + MEMORY_STEP_SEPARATOR.join(parts)


def fold_after_reply_text(result: CatchUp) -> str:
    if result.problems:
        return "The fold after the previous reply failed: " + "; ".join(result.problems)
    return (
        f"Folded after the previous reply: {result.folded} messages "
        f"({_plural_calls(result.calls)}, {result.seconds:.1f} s)"
    )


def compact_reply_text(turn: Turn | None, pinned_keys: Sequence[str], fallback_note: str | None) -> str:
    if turn is None:
        return f"{COMPACT_REPLY_PREFIX} nothing was folded. {fallback_note or ''}".strip()
    pinned = ", ".join(k for k in pinned_keys if turn.summary.pinned.get(k)) or "none set"
    if problems(turn):
        outcome = f"the summary call failed, nothing was folded ({'; '.join(problems(turn))})"
    elif _folded(turn):
        outcome = f"folded {_folded(turn)} messages into the summary"
    else:
        outcome = "nothing older than the recent window to fold"
    return (
        f"{COMPACT_REPLY_PREFIX} {outcome}. The summary now covers {turn.summary.folded_count} messages; "
        f"{len(turn.plan.send)} recent messages stay verbatim. Pinned: {pinned}."
    )


def _what_was_sent(turn: Turn) -> str:
    recent = f"{len(turn.plan.send)} recent messages verbatim"
    if not turn.summary.folded_count:
        return f"no summary yet, {recent}"
    return f"summary covering {turn.summary.folded_count} messages plus {recent}"


def _folded(turn: Turn) -> int:
    return turn.fold.folded if turn.fold is not None else 0


def _calls(turn: Turn) -> str:
    return _plural_calls(turn.fold.calls if turn.fold is not None else 0)


def _plural_calls(count: int) -> str:
    return f"{count} summary call" + ("" if count == 1 else "s")


def _next_try(retry_after: datetime | None, now: datetime) -> str:
    if retry_after is None or retry_after <= now:
        return "on the next turn"
    seconds = (retry_after - now).total_seconds()
    if seconds < 60:
        return f"in {math.ceil(seconds)} s"
    if seconds < 3600:
        return f"in {math.ceil(seconds / 60)} min"
    return f"in {math.ceil(seconds / 3600)} h"
