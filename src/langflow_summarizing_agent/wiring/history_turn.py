"""The Summarizing Message History's turn: the Agent's read, plan and fold, for flows that build their prompt.

The component's Retrieve mode calls `history()`. A turn:

1. refuses options a summary would change the meaning of (`refusal`): a sender filter and External Memory;
2. reads its settings and its scope (the component's Session ID and Context ID, else the graph's session);
3. reads and plans as the Agent does (`wiring.agent_turn.plan_folding_after_reply` on `langflow run`,
   `engine.turn.fold_if_due` inline elsewhere), on the same store, so both components share a session's summary;
4. on `langflow run`, starts the due fold once the flow's reply is built (`_fold_after_the_flow`);
5. returns the summary message and the window, in the component's order.

The window is the stock Message History's: its newest Number of Messages rows, the current input included when
Chat Input stored it first. A failure of the summary model or of the database never fails the run: it falls back
to the stock retrieval.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from lfx.components.models_and_agents.memory import MemoryComponent
from lfx.schema.message import Message

from langflow_summarizing_agent.engine import report
from langflow_summarizing_agent.engine.fold import FoldResult
from langflow_summarizing_agent.engine.records import Scope
from langflow_summarizing_agent.engine.settings import (
    FIELD_NAMES,
    WHOLE_NUMBER_FIELDS,
    FoldSettings,
    settings_from,
    whole_number,
)
from langflow_summarizing_agent.engine.turn import fold_if_due
from langflow_summarizing_agent.wiring import background
from langflow_summarizing_agent.wiring.agent_turn import (
    SAVE_FAILURES,
    AgentTurn,
    history_messages,
    keep,
    plan_folding_after_reply,
    setting,
    turn_of,
)
from langflow_summarizing_agent.wiring.summary_model import (
    BUILD_REMEDY_OF_HISTORY,
    build_summary_model,
    summarizer_for,
    summary_model_name,
)

logger = logging.getLogger(__name__)

ALL_SENDERS = "Machine and User"
"""The stock Sender Type that filters nothing."""
DESCENDING = "Descending"
REPLY_POLL_SECONDS = 0.1
REPLY_WAIT_SECONDS = 600.0
"""Longest wait for the flow's reply before the fold after it runs anyway (a branch that never builds, say)."""

FIELD_NAMES_OF_HISTORY = {
    **FIELD_NAMES,
    "n_messages": next(i.display_name for i in MemoryComponent.inputs if i.name == "n_messages"),
}
"""The fields as the Message History shows them: its message count is Number of Messages."""

FALLBACK_NOTE = (
    "Summaries need a Langflow database; without one no messages are stored, so there is no chat history, "
    "as with the stock Message History."
)
NO_SCOPE_NOTE = (
    "Summaries need the flow's id and owner; retrieved the last N messages as the stock Message History does."
)

StockRetrieval = Callable[[], Awaitable[Sequence[Message]]]


@dataclass(frozen=True)
class History:
    """What the component outputs: the summary message (None before the first fold) and the window, in order."""

    summary: Message | None
    window: tuple[Message, ...]

    @property
    def messages(self) -> list[Message]:
        return [*([self.summary] if self.summary is not None else []), *self.window]


def refusal(values: dict[str, Any]) -> str | None:
    """Why the switch cannot be on with these inputs, and what to change; None when it can."""
    switch = FIELD_NAMES["summarize_older_messages"]
    if values.get("memory"):
        return (
            f"{switch} folds the messages of Langflow's tables and cannot read an External Memory: disconnect "
            f"External Memory, or turn {switch} off to read it as the stock Message History does."
        )
    sender_type = values.get("sender_type")
    if (sender_type and sender_type != ALL_SENDERS) or values.get("sender_name"):
        return (
            f"{switch} folds the whole conversation, both senders, into one summary: set Sender Type to "
            f"{ALL_SENDERS} and leave Sender Name empty, or turn {switch} off to filter by sender."
        )
    return None


def check_refusal(component: Any) -> None:
    """Raise ValueError with what to change when the component's inputs cannot be summarized."""
    problem = refusal({name: setting(component, name) for name in ("memory", "sender_type", "sender_name")})
    if problem:
        raise ValueError(problem)


def settings_of(component: Any) -> FoldSettings | None:
    """The fold settings; None when Number of Messages is 0. The stock Message History's window is its Number of
    Messages rows, the Agent's one fewer (its input takes a slot), so the engine gets one more."""
    values = {name: setting(component, name) for name in (*WHOLE_NUMBER_FIELDS, "pinned_keys", "summary_timeout")}
    n_messages = whole_number(values.get("n_messages"), "n_messages", FIELD_NAMES_OF_HISTORY)
    if n_messages is not None and n_messages > 0:
        values["n_messages"] = n_messages + 1
    return settings_from(values, summary_model=summary_model_name(component), names=FIELD_NAMES_OF_HISTORY)


async def history(component: Any, stock_retrieval: StockRetrieval) -> History:
    """The summary and the window with the switch on. Runs once per build; a second output reuses it."""
    check_refusal(component)
    key = _turn_key(component)
    kept = turn_of(component)
    if kept is not None and kept.key == key and kept.history is not None:
        has_summary = kept.turn is not None and bool(kept.turn.plan.summary_text)
        return _as_history(kept.history, has_summary, descending=_descending(component))

    from langflow_summarizing_agent.storage.store import DatabaseStore, database_available
    from langflow_summarizing_agent.wiring.messages import as_chat_message

    if not database_available():
        keep(component, AgentTurn(key, FALLBACK_NOTE), level=logging.WARNING)
        return History(None, tuple(await stock_retrieval()))
    settings = settings_of(component)
    if settings is None:
        return History(None, ())
    scope = _scope_of(component)
    if scope is None:
        keep(component, AgentTurn(key, NO_SCOPE_NOTE), level=logging.WARNING)
        return History(None, tuple(await stock_retrieval()))

    store = DatabaseStore(scope)
    summarizer = summarizer_for(
        lambda: build_summary_model(component), settings.summary_timeout, remedy=BUILD_REMEDY_OF_HISTORY
    )
    folds = background.FOLDS
    started = time.perf_counter()
    try:
        if folds.enabled:
            turn = await plan_folding_after_reply(store, summarizer, settings)
        else:
            turn = await fold_if_due(store, summarizer, settings, failures=SAVE_FAILURES)
    except Exception as exc:
        logger.exception("Summarizing Message History: the summary store failed; using the last N messages")
        note = (
            f"Summarizing Message History: summary store unavailable ({type(exc).__name__}); used the last N messages."
        )
        keep(component, AgentTurn(key, note))
        return History(None, tuple(await stock_retrieval()))
    seconds = time.perf_counter() - started

    if folds.running(scope.key):
        turn = replace(turn, busy=True, due=None)
    if folds.enabled:
        _fold_after_the_flow(component, store, summarizer, settings)
    messages = await history_messages(turn, scope.session_id, as_chat_message)
    previous = folds.take_outcome(scope.key) if folds.enabled else None
    kept = AgentTurn(key, report.status_text(turn, previous), tuple(messages), turn, settings.pinned_keys, seconds)
    keep(component, kept)
    return _as_history(kept.history or (), bool(turn.plan.summary_text), descending=_descending(component))


def as_text(template: str, history: History) -> str:
    """The Messages output: the summary message's text, then the window formatted by the Template as the stock
    component formats it."""
    from lfx.helpers.data import data_to_text

    window = data_to_text(template, list(history.window)) if history.window else ""
    if history.summary is None:
        return window
    return "\n".join(part for part in (str(history.summary.text), window) if part)


def _as_history(messages: Sequence[Message], has_summary: bool, *, descending: bool = False) -> History:
    summary = messages[0] if has_summary and messages else None
    window = tuple(messages[1:] if summary is not None else messages)
    return History(summary, window[::-1] if descending else window)


def _fold_after_the_flow(component: Any, store: Any, summarizer: Any, settings: FoldSettings) -> None:
    """Start the due fold once this component's build task ends, and run it once the components after it (the
    model, Chat Output) are built: after the flow's reply, which the fold then reads from the store."""
    key = store.scope.key

    async def fold_after_reply() -> FoldResult | None:
        started = time.monotonic()
        turn = await fold_if_due(store, summarizer, settings, failures=SAVE_FAILURES)
        if turn.fold is None:
            for problem in report.problems(turn):
                logger.warning("Summarizing Message History: background fold: %s", problem)
            return None
        return replace(turn.fold, seconds=time.monotonic() - started)

    reply_built = _reply_built(component)

    def start(_: object = None) -> None:
        background.FOLDS.start(key, fold_after_reply, after=reply_built)

    task = asyncio.current_task()
    if task is None:
        start()
    else:
        task.add_done_callback(start)


def _reply_built(component: Any) -> Callable[[], Awaitable[None]]:
    """Waits until every component after this one in the flow is built, or `REPLY_WAIT_SECONDS` have passed."""
    vertex = component.__dict__.get("_vertex")
    try:
        after = list(component.graph.get_all_successors(vertex)) if vertex is not None else []
    except Exception:  # an ad hoc graph without successors: nothing to wait for
        logger.debug("Summarizing Message History: the flow's successors could not be read", exc_info=True)
        after = []

    async def wait() -> None:
        deadline = time.monotonic() + REPLY_WAIT_SECONDS
        # Polled: Langflow has no event for "a vertex is built".
        while any(not getattr(v, "built", True) for v in after) and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(REPLY_POLL_SECONDS)

    return wait


def _descending(component: Any) -> bool:
    return setting(component, "order") == DESCENDING


def _scope_of(component: Any) -> Scope | None:
    from lfx.components.models_and_agents.memory import _safe_graph_user_id
    from lfx.memory.flow_context import coerce_flow_id

    graph = component.graph
    flow_id = getattr(graph, "flow_id", None)
    user_id = _safe_graph_user_id(component)
    if coerce_flow_id(flow_id) is None or user_id is None:
        return None
    session_id = setting(component, "session_id") or graph.session_id
    context_id = setting(component, "context_id") or None
    return Scope(flow_id, user_id, str(session_id), context_id)


def _turn_key(component: Any) -> tuple[str, ...]:
    graph = component.graph
    session_id = setting(component, "session_id") or graph.session_id
    return (str(session_id), str(getattr(graph, "run_id", "")), str(setting(component, "context_id") or ""))
