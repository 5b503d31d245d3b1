"""The Summarizing Message History's part of a turn: what it hands the turn runner (`wiring.runner`).

The component's Retrieve mode calls `history()`. What is the Message History's own: it refuses options a summary
would change the meaning of (`refusal`: a sender filter, External Memory); its window is the stock Message
History's, its newest Number of Messages rows, the current input included when Chat Input stored it first; its
scope is its Session ID and Context ID, else the graph's session; it has no model of its own, so with no Summary
Model it folds with the flow's own language model, the first one after it, and with none in the flow it retrieves
as the stock Message History and says so; tokens are counted with the summary model's tokenizer; its catch-up after the
reply reads the reply from the store, once Langflow stores it final (`wiring.after_reply`).
It returns the summary message and the window, in the component's order, on the same store as the Agent, so both
components share a session's summary.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lfx.components.models_and_agents.memory import MemoryComponent
from lfx.schema.message import Message

from langflow_summarizing_agent import langflow_private
from langflow_summarizing_agent.engine.records import Scope
from langflow_summarizing_agent.engine.settings import (
    FIELD_NAMES,
    WHOLE_NUMBER_FIELDS,
    FoldSettings,
    settings_from,
)
from langflow_summarizing_agent.engine.tokens import counter_for
from langflow_summarizing_agent.wiring.runner import KeptTurn, Part, cached_history, keep, run_turn, setting, turn_of
from langflow_summarizing_agent.wiring.summary_model import (
    BUILD_REMEDY_OF_HISTORY,
    flow_model_node,
    summarizer_for,
    summary_model_builder,
    summary_model_name,
)

NAME = "Summarizing Message History"
ALL_SENDERS = "Machine and User"
"""The stock Sender Type that filters nothing."""
DESCENDING = "Descending"

FIELD_NAMES_OF_HISTORY: dict[str, str] = {
    **FIELD_NAMES,
    "n_messages": str(next(i.display_name for i in MemoryComponent.inputs if i.name == "n_messages")),
}
"""The fields as the Message History shows them: its message count is Number of Messages."""

FALLBACK_NOTE = (
    "Summaries need a Langflow database; without one no messages are stored, so there is no chat history, "
    "as with the stock Message History."
)
NO_SCOPE_NOTE = (
    "Summaries need the flow's id and owner; retrieved the last N messages as the stock Message History does."
)
NO_SUMMARY_MODEL_NOTE = (
    f"No {FIELD_NAMES['summary_model']} picked and no language model found after this Message History in the flow: "
    "nothing is summarized; retrieved the last N messages as the stock Message History does. Pick a "
    f"{FIELD_NAMES['summary_model']} on the node to summarize older messages."
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
    changes = []
    if sender_type and sender_type != ALL_SENDERS:
        changes.append(f"set Sender Type to {ALL_SENDERS}")
    if values.get("sender_name"):
        # The canvas keeps both at no filter while the switch is on; a tweak or a scripted flow can still set them.
        changes.append("send no Sender Name")
    if changes:
        return (
            f"{switch} folds the whole conversation, both senders, into one summary: {' and '.join(changes)}, or "
            f"turn {switch} off to filter by sender."
        )
    return None


def check_refusal(component: Any) -> None:
    """Raise ValueError with what to change when the component's inputs cannot be summarized."""
    problem = refusal({name: setting(component, name) for name in ("memory", "sender_type", "sender_name")})
    if problem:
        raise ValueError(problem)


def settings_of(component: Any) -> FoldSettings | None:
    """The fold settings; None when Number of Messages is 0. The window is Number of Messages: the stock Message
    History's count does not take the input's place, as the Agent's does."""
    values = {name: setting(component, name) for name in (*WHOLE_NUMBER_FIELDS, "pinned_keys", "summary_timeout")}
    model = summary_model_name(component)
    return settings_from(
        values,
        summary_model=model,
        counter=counter_for(model),
        names=FIELD_NAMES_OF_HISTORY,
        counts_the_input=False,
    )


async def history(component: Any, stock_retrieval: StockRetrieval) -> History:
    """The summary and the window with the switch on. Runs once per build; a second output reuses it."""
    check_refusal(component)
    descending = _descending(component)
    settings = settings_of(component)
    if settings is None:
        return History(None, ())
    if not has_summary_model(component) and flow_model_node(component) is None:
        # The Message History has no model of its own and the flow has none after it: nothing folds until one is
        # picked, and it says so rather than failing a fold every run.
        keep(component, KeptTurn(_turn_key(component), NO_SUMMARY_MODEL_NOTE))
        return History(None, tuple(await stock_retrieval()))
    part = Part(
        name=NAME,
        key=_turn_key(component),
        scope=_scope_of(component),
        settings=settings,
        summarizer=summarizer_for(
            summary_model_builder(component), settings.summary_timeout, remedy=BUILD_REMEDY_OF_HISTORY
        ),
        fallback_note=FALLBACK_NOTE,
        no_scope_note=NO_SCOPE_NOTE,
    )
    cached = cached_history(component, part.key)
    messages = list(cached) if cached is not None else await run_turn(component, part)
    if messages is None:
        return History(None, tuple(await stock_retrieval()))
    kept = turn_of(component)
    has_summary = kept is not None and kept.turn is not None and bool(kept.turn.plan.summary_text)
    return _as_history(messages, has_summary, descending=descending)


def has_summary_model(component: Any) -> bool:
    """A Summary Model is picked on the node, or a model is connected to it (a flow saved that way)."""
    model = getattr(component, "summary_model", None)
    if isinstance(model, list):
        return bool(model)
    return bool(model) and not isinstance(model, str)


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


def _descending(component: Any) -> bool:
    return setting(component, "order") == DESCENDING


def _scope_of(component: Any) -> Scope | None:
    from lfx.memory.flow_context import coerce_flow_id

    graph = component.graph
    flow_id = getattr(graph, "flow_id", None)
    user_id = langflow_private.graph_user_id(component)
    if coerce_flow_id(flow_id) is None or user_id is None:
        return None
    session_id = setting(component, "session_id") or graph.session_id
    context_id = setting(component, "context_id") or None
    return Scope(flow_id, user_id, str(session_id), context_id)


def _turn_key(component: Any) -> tuple[str, ...]:
    graph = component.graph
    session_id = setting(component, "session_id") or graph.session_id
    return (str(session_id), str(getattr(graph, "run_id", "")), str(setting(component, "context_id") or ""))
