"""The turn runner: the one way both components enter the engine.

A component hands the runner a `Part`: what is its own (its name, its settings read with its fields' names and its
window rule, its scope, its summary model, the store its catch-up after the reply reads and the signal that fold waits
for). The runner does the rest, the same for both:

1. falls back to the component's stock history without a Langflow database or without the flow's ids;
2. brings the summary table to head once per database (`Runtime.ready`), opens the scope's store;
3. hands the turn to the runtime's fold timing (`wiring.timing`): inline, or leaving the fold for after the reply
   (`wiring.after_reply`);
   `/compact` is an entry point of its own (`run_compaction`);
4. turns the plan into lfx Messages (`[summary message, *window]`) and keeps the turn's report (status, memory step)
   on the component, a function of what the engine returned.

A failure of the summary model or of the database never blocks a turn: the component gets None and uses its stock
history. An unexpected error falls back the same way, but is reported and logged as what it is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lfx.schema.message import Message
from lfx.utils.constants import MESSAGE_SENDER_AI, MESSAGE_SENDER_NAME_USER, MESSAGE_SENDER_USER

from langflow_summarizing_agent.engine import report
from langflow_summarizing_agent.engine.fold import CatchUp, Summarizer
from langflow_summarizing_agent.engine.records import Scope, StoredMessage
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.turn import Turn
from langflow_summarizing_agent.wiring import runtime as runtimes
from langflow_summarizing_agent.wiring.after_reply import ReplySignal, TurnWork, fold_after_reply
from langflow_summarizing_agent.wiring.runtime import Runtime
from langflow_summarizing_agent.wiring.usage import UsageObserver

logger = logging.getLogger(__name__)

TURN_ATTRIBUTE = "_summarizing_turn"
"""The component attribute that holds this turn's `KeptTurn`."""


@dataclass(frozen=True)
class Part:
    """What a component hands the turn runner: what is its own."""

    name: str
    """How the component is named in its reports and logs."""
    key: tuple[str, ...]
    """This turn: a second call with the same key returns the same history."""
    scope: Scope | None
    settings: FoldSettings
    summarizer: Summarizer
    fallback_note: str
    no_scope_note: str
    before: str | None = None
    """The turn's read ends before this message (the Agent's current input, which it sends itself)."""
    through: str | None = None
    """The catch-up after the reply reads through this message, and takes the reply from its signal."""
    signal: ReplySignal = ReplySignal.STORED_REPLY
    """What tells the catch-up after the reply that the final reply is there (`wiring.after_reply`)."""
    observer: UsageObserver | None = None


@dataclass(frozen=True)
class KeptTurn:
    """What the component keeps for one turn: the history it got, the engine's `Turn` (None when the turn fell back
    to the stock history), and the report shown as status and memory step."""

    key: tuple[str, ...]
    report: str
    history: tuple[Message, ...] | None = None
    """None when the turn fell back: a later call of the same turn runs it again."""
    turn: Turn | None = None
    pinned_keys: tuple[str, ...] = ()
    seconds: float = 0.0
    previous: CatchUp | None = None
    """The fold that ran after the previous reply, in this process."""
    observer: UsageObserver | None = None


def cached_history(component: Any, key: tuple[str, ...]) -> tuple[Message, ...] | None:
    """The history this turn already got, when the component calls again within the same turn."""
    kept = turn_of(component)
    return kept.history if kept is not None and kept.key == key else None


async def run_turn(component: Any, part: Part, *, runtime: Runtime | None = None) -> list[Message] | None:
    """The history for the model: `[summary message, *window]`; None when the component must use its stock
    history (no database, no scope, or the store failed)."""
    return await _run(component, part, runtime or runtimes.current(), compaction=False)


async def run_compaction(component: Any, part: Part, *, runtime: Runtime | None = None) -> list[Message] | None:
    """`/compact`: fold what may be folded now, then the history as `run_turn` gives it."""
    return await _run(component, part, runtime or runtimes.current(), compaction=True)


async def _run(component: Any, part: Part, runtime: Runtime, *, compaction: bool) -> list[Message] | None:
    from langflow_summarizing_agent.storage.store import DatabaseStore, database_available, failure_note
    from langflow_summarizing_agent.wiring.messages import as_chat_message

    if not database_available():
        # A warning, not info: `lfx run` shows no component status, but its output carries warnings.
        keep(component, KeptTurn(part.key, part.fallback_note), level=logging.WARNING)
        return None
    scope = part.scope
    if scope is None:
        # A summary is kept per flow, owner and session; without both ids Langflow's own reads fail closed too.
        keep(component, KeptTurn(part.key, part.no_scope_note), level=logging.WARNING)
        return None
    started = time.perf_counter()
    try:
        await runtime.ready()
        store = DatabaseStore(scope, locks=runtime.fold_locks, before=part.before)
        fold_store = DatabaseStore(scope, locks=runtime.fold_locks, through=part.through) if part.through else store
        fold = fold_after_reply(part.name, fold_store, part.summarizer, part.settings, runtime.save_failures)
        work = TurnWork(store, part.summarizer, part.settings, runtime.save_failures, fold, part.signal, part.key)
        turn = await (runtime.timing.compact(work) if compaction else runtime.timing.turn(work))
    except Exception as exc:
        failure = failure_note(exc)
        logger.exception("%s: %s; using the last N messages", part.name, failure)
        keep(component, KeptTurn(part.key, f"{part.name}: {failure}; used the last N messages."))
        return None
    seconds = time.perf_counter() - started
    history = await history_messages(turn, scope.session_id, as_chat_message)
    previous = runtime.timing.previous(scope.key)
    kept = KeptTurn(
        part.key,
        report.status_text(turn, previous, name=part.name),
        tuple(history),
        turn,
        part.settings.pinned_keys,
        seconds,
        previous,
        part.observer,
    )
    keep(component, kept)
    return history


async def history_messages(
    turn: Turn, session_id: str, as_chat_message: Callable[[StoredMessage], Awaitable[Message]]
) -> list[Message]:
    """`[summary message, *window]` as lfx Messages; the summary is user-role and has no id (never stored)."""
    history: list[Message] = []
    if turn.plan.summary_text:
        history.append(
            Message(
                text=turn.plan.summary_text,
                sender=MESSAGE_SENDER_USER,
                sender_name=MESSAGE_SENDER_NAME_USER,
                session_id=session_id,
            )
        )
    for message in turn.plan.send:
        if message.payload is not None:
            history.append(await as_chat_message(message))
        else:
            # A message cut to fit the budget: a new, unstored Message with the cut text.
            sender = MESSAGE_SENDER_USER if message.role == "user" else MESSAGE_SENDER_AI
            history.append(Message(text=message.text, sender=sender, sender_name=sender, session_id=session_id))
    return history


def setting(component: Any, name: str) -> Any:
    """An input's value. A flow saved by an older version stores the summary settings hidden while the switch was
    off, and Langflow leaves hidden fields out when it builds the flow: their value is read from the flow instead."""
    from langflow_summarizing_agent import langflow_private

    if name not in langflow_private.built_parameters(component):
        field = _saved_template(component).get(name)
        if isinstance(field, dict) and "value" in field:
            return field["value"]
    return getattr(component, name, None)


def _saved_template(component: Any) -> Mapping[str, Any]:
    from langflow_summarizing_agent import langflow_private

    vertex = langflow_private.vertex_of(component)
    if vertex is None:
        return {}
    try:
        template = vertex.data["node"]["template"]
    except (AttributeError, KeyError, TypeError):
        return {}
    return template if isinstance(template, Mapping) else {}


def turn_of(component: Any) -> KeptTurn | None:
    """What the component keeps for its last turn."""
    return component.__dict__.get(TURN_ATTRIBUTE)


def report_of(component: Any) -> str | None:
    kept = turn_of(component)
    return kept.report if kept is not None else None


def with_report(component: Any, status: Any) -> Any:
    """The component status followed by this turn's report, if there is one."""
    text = report_of(component)
    if not text or (isinstance(status, str) and text in status):
        return status
    return f"{status}\n\n{text}" if isinstance(status, str) and status else text


def keep(component: Any, kept: KeptTurn, *, level: int = logging.INFO) -> None:
    setattr(component, TURN_ATTRIBUTE, kept)
    logger.log(level, kept.report)
    log = getattr(component, "log", None)
    if callable(log):
        try:
            log(kept.report)
        except Exception:
            logger.debug("component log unavailable", exc_info=True)
