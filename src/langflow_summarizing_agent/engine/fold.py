"""Where a fold happens: older messages folded into the session's summary, with one compare-and-swap save.

`fold()` takes the plan's fold, sends it to the summary model in batches of at most `max_fold_messages`, plans
again with each new summary while more is due, and stops at Max Folds per Turn calls. Then it saves once, by
compare-and-swap against the summary it read, and returns a `FoldResult`: the summary the turn goes on with, or the
failure with its back-off. It never raises for the summary model or the store: a failed fold never fails a turn.

When a fold runs (in the turn, after the reply, after the session's running fold) is its caller's choice.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from langchain_core.messages import BaseMessage

from langflow_summarizing_agent.engine.plan import Plan, TurnRead, plan_turn
from langflow_summarizing_agent.engine.prompt import (
    build_fold_prompt,
    build_fold_prompt_on_prefix,
    clip_words,
    count_words,
    folds_on_prefix,
    merge_pinned,
    parse_fold_output,
)
from langflow_summarizing_agent.engine.records import Summary
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.store import SessionStore

logger = logging.getLogger(__name__)

FOLD_RETRY_BASE = timedelta(seconds=30)
FOLD_RETRY_MAX = timedelta(hours=1)

Summarizer = Callable[[list[BaseMessage]], Awaitable[str]]
"""Calls the summary model with the fold prompt and returns its text."""


@dataclass(frozen=True)
class FoldResult:
    """What a fold did. `summary` is the summary the turn goes on with: the one saved, the one another run saved
    first, or the one read with the back-off of this failure."""

    summary: Summary
    folded: int = 0
    """Messages folded and saved."""
    calls: int = 0
    """Summary calls made."""
    input_tokens: int = 0
    """Tokens of the fold prompts."""
    problems: tuple[str, ...] = ()
    seconds: float = 0.0
    on_prefix: int = 0
    """Summary calls made on the agent's prefix (`build_fold_prompt_on_prefix`)."""


def backoff_delay(failed_folds: int) -> timedelta:
    doublings = min(max(failed_folds - 1, 0), 16)
    return min(FOLD_RETRY_BASE * 2**doublings, FOLD_RETRY_MAX)


class SaveFailures:
    """The back-off of scopes whose last save failed, kept in memory when the store could not record it either
    (`fold` first tries to store it with the summary, where every worker reads it).

    Without it a store that reads but cannot write (a read-only replica, a locked SQLite file) would get a summary
    call on every turn. Bounded: the oldest scopes are forgotten first.
    """

    def __init__(self, max_scopes: int = 10_000) -> None:
        self.max_scopes = max_scopes
        self._failures: OrderedDict[Hashable, tuple[int, datetime]] = OrderedDict()

    def record(self, key: Hashable, summary: Summary) -> None:
        if summary.retry_after is None:
            return
        self._failures[key] = (summary.failed_folds, summary.retry_after)
        self._failures.move_to_end(key)
        while len(self._failures) > self.max_scopes:
            self._failures.popitem(last=False)

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def applied(self, key: Hashable, summary: Summary) -> Summary:
        """`summary` with the back-off of a failed save, when that is later than the stored one."""
        failure = self._failures.get(key)
        if failure is None or (summary.retry_after is not None and summary.retry_after >= failure[1]):
            return summary
        return replace(summary, failed_folds=max(summary.failed_folds, failure[0]), retry_after=failure[1])


async def fold(
    read: TurnRead,
    plan: Plan,
    settings: FoldSettings,
    summarizer: Summarizer,
    store: SessionStore,
    *,
    now: Callable[[], datetime],
    failures: SaveFailures,
    prefix: Sequence[BaseMessage] | None = None,
) -> FoldResult:
    """Fold `plan.fold` and what becomes due after it, in at most Max Folds per Turn summary calls; save once.

    `prefix` is the prompt the agent just sent and its reply: when the first batch is the messages that follow the
    summary message there, that call asks on the prefix (`build_fold_prompt_on_prefix`), which the provider serves
    from its prompt cache; every other call quotes the batch (`build_fold_prompt`).
    """
    started = time.monotonic()
    read_summary = read.summary
    summary = read_summary
    folded = calls = input_tokens = on_prefix = 0
    problem = None
    while plan.fold and calls < settings.max_folds_per_turn and problem is None:
        pending = list(plan.fold)
        folded_before = folded
        while pending and calls < settings.max_folds_per_turn:
            batch = pending[: settings.max_fold_messages]
            if prefix is not None and calls == 0 and folds_on_prefix(prefix, batch):
                prompt = build_fold_prompt_on_prefix(
                    prefix,
                    summary,
                    batch,
                    pinned_keys=settings.pinned_keys,
                    summary_words=settings.summary_words,
                    fold_id=uuid.uuid4().hex[:12],
                )
                on_prefix += 1
            else:
                prompt = build_fold_prompt(
                    summary,
                    batch,
                    pinned_keys=settings.pinned_keys,
                    summary_words=settings.summary_words,
                    max_message_chars=settings.max_message_chars,
                )
            input_tokens += settings.counter.prompt(prompt)
            calls += 1
            try:
                proposed_pinned, text = parse_fold_output(await summarizer(prompt))
            except Exception as exc:  # noqa: BLE001 - any summary model failure must leave the turn running
                problem = f"fold failed ({plan.reason}): {_describe(exc)}"
                logger.warning("Summarizing Agent: %s; the previous summary is kept", problem)
                break
            if count_words(text) > settings.summary_words:
                logger.info(
                    "Summarizing Agent: the summary model wrote %d words; clipped to the Summary Word Budget of %d",
                    count_words(text),
                    settings.summary_words,
                )
            summary = replace(
                summary,
                text=clip_words(text, settings.summary_words),
                pinned=merge_pinned(summary.pinned, proposed_pinned, settings.pinned_keys),
                cursor=batch[-1].cursor,
                folded_count=summary.folded_count + len(batch),
                # A fold that succeeded ends the back-off, for the rounds after it too.
                failed_folds=0,
                retry_after=None,
            )
            folded += len(batch)
            pending = pending[len(batch) :]
        if folded == folded_before:
            break
        plan = plan_turn(read.with_summary(summary), settings, now=now())

    problems = (problem,) if problem else ()
    if folded:
        summary = replace(summary, failed_folds=0, retry_after=None, summary_model=settings.summary_model)
    else:
        failed = read_summary.failed_folds + 1
        summary = replace(read_summary, failed_folds=failed, retry_after=now() + backoff_delay(failed))

    def result(summary: Summary, folded: int, problems: tuple[str, ...]) -> FoldResult:
        return FoldResult(summary, folded, calls, input_tokens, problems, time.monotonic() - started, on_prefix)

    key = store.scope.key
    try:
        saved = await store.save(summary)
    except Exception as exc:  # noqa: BLE001 - a store that cannot save must leave the turn running
        # A failed save counts as a failed fold: the previous summary stays and the back-off applies.
        failed = read_summary.failed_folds + 1
        kept = replace(read_summary, failed_folds=failed, retry_after=now() + backoff_delay(failed))
        save_problem = (
            f"the summary could not be saved ({_describe(exc)}); counted as failed fold {failed}, "
            f"next try after {kept.retry_after:%Y-%m-%d %H:%M:%S} UTC"
        )
        logger.warning("Summarizing Agent: %s; the previous summary is kept", save_problem)
        return result(await _record_backoff(store, kept, failures), 0, (*problems, save_problem))
    if saved is not None:
        failures.forget(key)
        return result(saved, folded, problems)
    # Another run saved first: its summary wins and this fold is dropped, with no second model call.
    lost = "another run saved the summary first; this turn used its summary"
    try:
        winner = await store.load()
    except Exception as exc:  # noqa: BLE001 - a store that cannot read must leave the turn running
        logger.warning("Summarizing Agent: the summary could not be read after a lost save (%s)", _describe(exc))
        return result(read_summary, 0, (*problems, f"{lost}, and it could not be read ({_describe(exc)})"))
    logger.info("Summarizing Agent: another run saved the summary first; using its version %d", winner.version)
    return result(winner, 0, (*problems, lost))


async def _record_backoff(store: SessionStore, kept: Summary, failures: SaveFailures) -> Summary:
    """Store the back-off of a failed save with the summary, where every worker reads it; when the store cannot take
    that either, keep it in this process (`failures`). A lost compare-and-swap means a summary was saved after all
    (this fold's, if only its acknowledgement was lost, or another run's): no back-off then."""
    try:
        stored = await store.save(kept)
    except Exception as exc:  # noqa: BLE001 - the store that just failed may fail again; the turn goes on
        logger.info("Summarizing Agent: the back-off could not be stored either (%s); kept in memory", _describe(exc))
        failures.record(store.scope.key, kept)
        return kept
    failures.forget(store.scope.key)
    return stored if stored is not None else kept


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
