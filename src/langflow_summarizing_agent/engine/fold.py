"""Where a fold happens: a turn's catch-up folds older messages into the session's summary, then saves it once,
by compare-and-swap.

A fold is one summary call over at most `max_messages_per_fold` messages (and one more, quoting the batch, when a
fold on the agent's prefix is answered with a tool call). A catch-up is a turn's folds: `catch_up()` makes them and
reads in three steps. It summarizes (`_summarize`): the plan's fold goes to the summary model, one fold at a time,
planning again with each new summary while more is due, and stops at Max Folds per Turn folds. It decides the
summary to save (`_summary_to_save`): the folded one, or the one read with the back-off of a failure. It saves once
(`_save`), by compare-and-swap against the summary it read: saved, lost to another run, or failed. It returns a
`CatchUp`: the summary the turn goes on with, or the failure with its back-off. It never raises for the summary
model or the store: a failed fold never fails a turn.

When a catch-up runs (in the turn, after the reply, after the session's running one) is its caller's choice.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from langchain_core.messages import BaseMessage

from langflow_summarizing_agent.engine.fold_cost import NO_COST, answer_cost, with_spent
from langflow_summarizing_agent.engine.fold_edits import batches, edited_since, said_before_edit
from langflow_summarizing_agent.engine.plan import Plan, TurnRead, plan_turn
from langflow_summarizing_agent.engine.prompt import (
    FoldToolCall,
    build_fold_prompt,
    build_fold_prompt_on_prefix,
    clip_words,
    count_words,
    folds_on_prefix,
    merge_pinned,
    parse_fold_output,
)
from langflow_summarizing_agent.engine.records import Change, StoredMessage, Summary
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.store import SessionStore

logger = logging.getLogger(__name__)

FOLD_RETRY_BASE = timedelta(seconds=30)
FOLD_RETRY_MAX = timedelta(hours=1)
FAILURE_CHARS = 100
"""Longest `Summary.fold_failure`: the memory step of every later turn repeats it, until a fold succeeds."""
PINNED_SHOWN_AS = "[pinned]"
"""What a pinned value reads as in a failure: failures are shown in the UI, and a provider may quote its input."""

Summarizer = Callable[[list[BaseMessage]], Awaitable[str]]
"""Calls the summary model with the fold prompt and returns its text (a `ReportedAnswer` when the provider reported
usage); raises `FoldToolCall` when the model answered with a tool call."""


@dataclass(frozen=True)
class Prefix:
    """The prompt the agent just sent, with its reply, and the summarizer that asks on it: the agent's own model with
    the agent's tools bound as that prompt had them (the provider caches them with it), told to call none. Only the
    fold on the prefix uses it; a quoted fold prompt goes to the plain summarizer, with no tools."""

    messages: tuple[BaseMessage, ...]
    summarizer: Summarizer


@dataclass(frozen=True)
class CatchUp:
    """What a catch-up did: its folds and its one save. `summary` is the summary the turn goes on with: the one
    saved, the one another run saved first, or the one read with the back-off of this failure."""

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
    model: str | None = None
    """The summary model that folded, or was asked to (`FoldSettings.summary_model`): Langflow may pick another
    model than the one the user picked, so the memory step names it."""


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
        self._failures: OrderedDict[Hashable, tuple[int, datetime, str | None]] = OrderedDict()

    def record(self, key: Hashable, summary: Summary) -> None:
        if summary.retry_after is None:
            return
        self._failures[key] = (summary.failed_folds, summary.retry_after, summary.fold_failure)
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
        return replace(
            summary, failed_folds=max(summary.failed_folds, failure[0]), retry_after=failure[1], fold_failure=failure[2]
        )


async def catch_up(
    read: TurnRead,
    plan: Plan,
    settings: FoldSettings,
    summarizer: Summarizer,
    store: SessionStore,
    *,
    now: Callable[[], datetime],
    failures: SaveFailures,
    prefix: Prefix | None = None,
) -> CatchUp:
    """The catch-up: fold `Plan.fold` and what becomes due after it, in at most Max Folds per Turn folds; save once.

    `prefix` is the prompt the agent just sent and its reply: when the first batch is the messages that follow the
    summary message there, that call asks on the prefix (`build_fold_prompt_on_prefix`), which the provider serves
    from its prompt cache; every other call quotes the batch (`build_fold_prompt`). A fold on the prefix answered
    with a tool call is asked once more, quoting its batch.
    """
    started = time.monotonic()
    folds = await _summarize(read, plan, settings, summarizer, now, prefix)
    saved = await _save_folds(store, read.summary, folds, settings, failures, now)
    calls, input_tokens = folds.calls, folds.input_tokens
    if folds.folded and not saved.is_this_fold and edited_since(read.summary, saved.summary):
        # A user edited the memory while these folds ran: the save lost, and the same messages are folded again on
        # top of the edit, so the edit stays and no message waits for the next catch-up.
        logger.info("Summarizing Agent: the memory was edited during the fold; folding again on top of the edit")
        read, lost = read.with_summary(saved.summary), folds.cost
        folds = await _summarize(read, plan, settings, summarizer, now, None)
        # The version this makes cost the folds whose save lost too.
        folds = replace(folds, cost=with_spent(folds.cost, lost))
        saved = await _save_folds(store, read.summary, folds, settings, failures, now)
        calls, input_tokens = calls + folds.calls, input_tokens + folds.input_tokens
    return CatchUp(
        summary=saved.summary,
        folded=folds.folded if saved.is_this_fold else 0,
        calls=calls,
        input_tokens=input_tokens,
        problems=(*folds.problems, *saved.problems),
        seconds=time.monotonic() - started,
        on_prefix=folds.on_prefix,
        model=settings.summary_model,
    )


async def fold_for_one_call(
    summary: Summary, batch: Sequence[StoredMessage], settings: FoldSettings, summarizer: Summarizer
) -> Summary:
    """`summary` with `batch` folded in by one summary call, for one model call of the agent and not saved: what a call
    refused for its length is retried with when it must leave window messages out (`wiring.long_turn`). Raises as the
    summary call does; the caller then leaves the messages in."""
    prompt = _fold_prompt(summary, batch, settings, None)
    return _folded(_Folds(summary), batch, await summarizer(prompt), settings).summary


@dataclass(frozen=True)
class _Folds:
    """What the folds of a catch-up made: the summary after the last one that succeeded, and what they cost."""

    summary: Summary
    folded: int = 0
    calls: int = 0
    input_tokens: int = 0
    """Tokens of the fold prompts, counted."""
    cost: Change = NO_COST
    """What the calls cost, as the provider reported each call where it did (`ReportedAnswer`), else counted."""
    last_counted: int = 0
    """The counted input tokens of the last call."""
    on_prefix: int = 0
    problems: tuple[str, ...] = ()
    """The failed fold that ended the catch-up, if one did."""
    failure: str | None = None
    """That failure in a few words (`Summary.fold_failure`)."""


async def _summarize(
    read: TurnRead,
    plan: Plan,
    settings: FoldSettings,
    summarizer: Summarizer,
    now: Callable[[], datetime],
    prefix: Prefix | None,
) -> _Folds:
    """Fold the plan's fold, then, planning again with each new summary, what becomes due; until nothing is due, a
    call fails, a round folds nothing or Max Folds per Turn calls are made."""
    folds = _Folds(read.summary)
    while plan.fold and folds.calls < settings.max_folds_per_turn and not folds.problems:
        after = await _fold_round(folds, plan, settings, summarizer, prefix)
        if after.folded == folds.folded:
            return after
        folds = after
        plan = plan_turn(read.with_summary(folds.summary), settings, now=now())
    return folds


async def _fold_round(
    folds: _Folds, plan: Plan, settings: FoldSettings, summarizer: Summarizer, prefix: Prefix | None
) -> _Folds:
    """The plan's fold in batches of at most `max_messages_per_fold`, one summary call each, while calls are left; the
    first failed call ends it."""
    for batch in batches(plan.fold, settings.max_messages_per_fold, folds.summary.edited_at):
        if folds.calls >= settings.max_folds_per_turn or folds.problems:
            break
        folds = await _fold_batch(folds, batch, plan.reason, settings, summarizer, prefix)
    return folds


async def _fold_batch(
    folds: _Folds,
    batch: Sequence[StoredMessage],
    reason: str | None,
    settings: FoldSettings,
    summarizer: Summarizer,
    prefix: Prefix | None,
) -> _Folds:
    """One summary call: `batch` folded into the summary, or the failure that leaves the summary as it was. The first
    call asks on the agent's prefix when the batch follows its summary message there; answered with a tool call, it
    is asked once more quoting the batch, with no tools."""
    if prefix is not None and folds.calls == 0 and folds_on_prefix(prefix.messages, batch):
        prompt = _fold_prompt(folds.summary, batch, settings, prefix.messages)
        folds = _counted(folds, prompt, settings, on_prefix=True)
        try:
            return _folded(folds, batch, await prefix.summarizer(prompt), settings)
        except FoldToolCall as exc:
            logger.info("Summarizing Agent: %s; asking again with the batch quoted", _describe(exc))
        except Exception as exc:  # noqa: BLE001 - any summary model failure must leave the turn running
            return _failed(folds, reason, exc)
    prompt = _fold_prompt(folds.summary, batch, settings, None)
    folds = _counted(folds, prompt, settings)
    try:
        return _folded(folds, batch, await summarizer(prompt), settings)
    except Exception as exc:  # noqa: BLE001 - any summary model failure must leave the turn running
        return _failed(folds, reason, exc)


def _counted(folds: _Folds, prompt: list[BaseMessage], settings: FoldSettings, *, on_prefix: bool = False) -> _Folds:
    counted = settings.counter.prompt(prompt)
    return replace(
        folds,
        calls=folds.calls + 1,
        input_tokens=folds.input_tokens + counted,
        cost=replace(folds.cost, calls=folds.cost.calls + 1, input_tokens=folds.cost.input_tokens + counted),
        last_counted=counted,
        on_prefix=folds.on_prefix + int(on_prefix),
    )


def _folded(folds: _Folds, batch: Sequence[StoredMessage], answer: str, settings: FoldSettings) -> _Folds:
    proposed_pinned, text = parse_fold_output(answer)
    summary = _folded_into(folds.summary, batch, proposed_pinned, text, settings)
    return replace(
        folds,
        summary=summary,
        folded=folds.folded + len(batch),
        cost=answer_cost(folds.cost, folds.last_counted, answer, settings.counter),
    )


def _failed(folds: _Folds, reason: str | None, exc: Exception) -> _Folds:
    problem = _without_pinned(f"fold failed ({reason}): {_describe(exc)}", folds.summary)
    logger.warning("Summarizing Agent: %s; the previous summary is kept", problem)
    return replace(folds, problems=(problem,), failure=failure_note(_describe(exc), folds.summary))


def _fold_prompt(
    summary: Summary, batch: Sequence[StoredMessage], settings: FoldSettings, prefix: Sequence[BaseMessage] | None
) -> list[BaseMessage]:
    """The prompt asking on `prefix` when there is one, else quoting the batch."""
    if prefix is not None:
        return build_fold_prompt_on_prefix(
            prefix,
            summary,
            batch,
            pinned_keys=settings.pinned_keys,
            summary_words=settings.summary_words,
            fold_id=uuid.uuid4().hex[:12],
            corrected=said_before_edit(summary, batch),
        )
    return build_fold_prompt(
        summary,
        batch,
        pinned_keys=settings.pinned_keys,
        summary_words=settings.summary_words,
        max_message_chars=settings.max_message_chars,
        corrected=said_before_edit(summary, batch),
    )


def _folded_into(
    summary: Summary,
    batch: Sequence[StoredMessage],
    proposed_pinned: dict[str, Any],
    text: str,
    settings: FoldSettings,
) -> Summary:
    """`summary` once `batch` is folded into it: the new text clipped to the Summary Word Budget, the pinned facts
    merged, the cursor on the batch's last message. The pinned facts as a user last wrote them stand against messages
    stored before the edit: such a batch changes none of them (`_batches` never mixes the two)."""
    if said_before_edit(summary, batch):
        proposed_pinned = {}
    if count_words(text) > settings.summary_words:
        logger.info(
            "Summarizing Agent: the summary model wrote %d words; clipped to the Summary Word Budget of %d",
            count_words(text),
            settings.summary_words,
        )
    return replace(
        summary,
        text=clip_words(text, settings.summary_words),
        pinned=merge_pinned(summary.pinned, proposed_pinned, settings.pinned_keys),
        cursor=batch[-1].cursor,
        folded_count=summary.folded_count + len(batch),
        folded_tokens=(
            None
            if summary.folded_tokens is None
            else summary.folded_tokens + sum(settings.counter.message(m) for m in batch)
        ),
        # A fold that succeeded ends the back-off, for the rounds after it too.
        failed_folds=0,
        retry_after=None,
        fold_failure=None,
    )


def _summary_to_save(
    read_summary: Summary, folds: _Folds, settings: FoldSettings, now: Callable[[], datetime]
) -> Summary:
    """The folded summary, naming the summary model; or, when nothing was folded, the summary read with the back-off
    of one more failed fold."""
    if folds.folded:
        return replace(
            folds.summary, failed_folds=0, retry_after=None, fold_failure=None, summary_model=settings.summary_model
        )
    return _with_backoff(read_summary, now(), folds.failure)


def _with_backoff(summary: Summary, now: datetime, failure: str | None) -> Summary:
    failed = summary.failed_folds + 1
    return replace(summary, failed_folds=failed, retry_after=now + backoff_delay(failed), fold_failure=failure)


@dataclass(frozen=True)
class _Saved:
    """What the save left: the summary the turn goes on with, whether it is this catch-up's, and what went wrong."""

    summary: Summary
    is_this_fold: bool
    problems: tuple[str, ...] = ()


async def _save_folds(
    store: SessionStore,
    read_summary: Summary,
    folds: _Folds,
    settings: FoldSettings,
    failures: SaveFailures,
    now: Callable[[], datetime],
) -> _Saved:
    to_save = _summary_to_save(read_summary, folds, settings, now)
    return await _save(store, read_summary, to_save, failures, now, _change(read_summary, to_save, folds))


def _change(read_summary: Summary, summary: Summary, folds: _Folds) -> Change | None:
    """The fold as the version it makes: what it folded and cost; None when it folded nothing (a back-off)."""
    if not folds.folded:
        return None
    tokens = (summary.folded_tokens or 0) - (read_summary.folded_tokens or 0)
    return replace(folds.cost, messages=folds.folded, tokens=max(tokens, 0))


async def _save(
    store: SessionStore,
    read_summary: Summary,
    summary: Summary,
    failures: SaveFailures,
    now: Callable[[], datetime],
    change: Change | None,
) -> _Saved:
    """One compare-and-swap save of `summary` against `read_summary`: saved, lost to another run, or failed."""
    try:
        saved = await store.save(summary, change)
    except Exception as exc:  # noqa: BLE001 - a store that cannot save must leave the turn running
        return await _save_failed(store, read_summary, exc, failures, now())
    if saved is None:
        return await _lost_save(store, read_summary)
    failures.forget(store.scope.key)
    return _Saved(saved, is_this_fold=True)


async def _save_failed(
    store: SessionStore, read_summary: Summary, exc: Exception, failures: SaveFailures, now: datetime
) -> _Saved:
    """A failed save counts as a failed catch-up: the previous summary stays and the back-off applies. Only the error's
    first line is told: a database error goes on with the statement and its parameters, the summary among them."""
    failure = f"the summary could not be saved ({_describe(exc, first_line=True)})"
    kept = _with_backoff(read_summary, now, failure_note(failure, read_summary))
    problem = (
        f"{_without_pinned(failure, read_summary)}; counted as failed fold {kept.failed_folds}, "
        f"next try after {kept.retry_after:%Y-%m-%d %H:%M:%S} UTC"
    )
    logger.warning("Summarizing Agent: %s; the previous summary is kept", problem)
    return _Saved(await _record_backoff(store, kept, failures), is_this_fold=False, problems=(problem,))


async def _lost_save(store: SessionStore, read_summary: Summary) -> _Saved:
    """Another run saved first: its summary wins and this catch-up's folds are dropped, with no second model call."""
    lost = "another run saved the summary first; this turn used its summary"
    try:
        winner = await store.load()
    except Exception as exc:  # noqa: BLE001 - a store that cannot read must leave the turn running
        logger.warning("Summarizing Agent: the summary could not be read after a lost save (%s)", _describe(exc))
        return _Saved(
            read_summary, is_this_fold=False, problems=(f"{lost}, and it could not be read ({_describe(exc)})",)
        )
    logger.info("Summarizing Agent: another run saved the summary first; using its version %d", winner.version)
    return _Saved(winner, is_this_fold=False, problems=(lost,))


async def _record_backoff(store: SessionStore, kept: Summary, failures: SaveFailures) -> Summary:
    """Store the back-off of a failed save with the summary, where every worker reads it; when the store cannot take
    that either, keep it in this process (`failures`). A lost compare-and-swap means a summary was saved after all
    (this catch-up's, if only its acknowledgement was lost, or another run's): no back-off then."""
    try:
        stored = await store.save(kept)
    except Exception as exc:  # noqa: BLE001 - the store that just failed may fail again; the turn goes on
        logger.info("Summarizing Agent: the back-off could not be stored either (%s); kept in memory", _describe(exc))
        failures.record(store.scope.key, kept)
        return kept
    failures.forget(store.scope.key)
    return stored if stored is not None else kept


def failure_note(text: str, summary: Summary) -> str:
    """`text` as `Summary.fold_failure`: its first line, pinned values masked, at most `FAILURE_CHARS`."""
    lines = text.strip().splitlines()
    note = _without_pinned(" ".join(lines[0].split()) if lines else "", summary)
    return note if len(note) <= FAILURE_CHARS else note[: FAILURE_CHARS - 1].rstrip() + "…"


def _without_pinned(text: str, summary: Summary) -> str:
    """`text` with each pinned value of `summary` standing alone in it masked (`PINNED_SHOWN_AS`)."""
    for value in summary.pinned.values():
        if value:
            text = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", PINNED_SHOWN_AS, text)
    return text


def _describe(exc: BaseException, *, first_line: bool = False) -> str:
    text = str(exc).strip()
    if first_line:
        text = text.splitlines()[0] if text else text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
