"""The component's turn: how Langflow calls in, and who decides when the fold runs.

The Summarizing Agent's `get_memory_data()` calls `memory_data()`, and `/compact` calls `compact_reply()`. A turn:

1. reads its settings off the component's inputs (`engine.settings.settings_from`) and its scope off the graph,
   with tokens counted as the agent's model counts them, scaled by the usage its provider reported for this session,
   and twice Fold Batch when the provider caches prompts (`wiring.usage`);
2. reads and plans, with no summary call (`engine.turn.read_and_plan`);
3. decides when a due fold runs:
   - on `langflow run` (background folds on) it runs after the reply, planned with the reply the agent produced
     (`_fold_after_reply`), on the agent's own prompt when its provider caches; the turn never folds inline;
   - in a script or under `lfx run` (no server loop outlives the run) it runs inline (`engine.turn.fold_now`);
   - `/compact` waits for the session's running fold, then folds inline;
4. hands the Agent the summary message and the window as lfx Messages, and reports the turn (status, memory step)
   from what the plan and the fold returned.

What the component keeps for the turn is one `AgentTurn`, in one attribute. A failure of the summary model or of
the database never blocks a turn: it falls back to the stock last-N history.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import AIMessage
from lfx.schema.content_types import ToolContent
from lfx.schema.message import Message
from lfx.utils.constants import MESSAGE_SENDER_AI, MESSAGE_SENDER_NAME_USER, MESSAGE_SENDER_USER

from langflow_summarizing_agent.engine import report
from langflow_summarizing_agent.engine.fold import FoldResult, SaveFailures
from langflow_summarizing_agent.engine.plan import COMPACT_COMMAND
from langflow_summarizing_agent.engine.records import Scope, StoredMessage, utcnow
from langflow_summarizing_agent.engine.settings import (
    CHECKED_FIELDS,
    FIELD_NAMES,
    WHOLE_NUMBER_FIELDS,
    FoldSettings,
    pinned_keys_from,
    settings_from,
    whole_number,
)
from langflow_summarizing_agent.engine.tokens import counter_for
from langflow_summarizing_agent.engine.turn import Turn, fold_if_due, read_and_plan
from langflow_summarizing_agent.wiring import background, usage
from langflow_summarizing_agent.wiring.summary_model import (
    agent_model_name,
    agent_model_provider,
    build_summary_model,
    summarizer_for,
    summary_model_name,
)
from langflow_summarizing_agent.wiring.usage import UsageObserver

logger = logging.getLogger(__name__)

TURN_ATTRIBUTE = "_summarizing_turn"
"""The component attribute that holds this turn's `AgentTurn`."""
FALLBACK_NOTE = (
    "Summaries need a Langflow database; without one no messages are stored, so there is no chat history, "
    "as with the stock Agent."
)
NO_SCOPE_NOTE = "Summaries need the flow's id and owner; using the last N messages as the stock Agent does."
MEMORY_STEP_NAME = "summarizing_agent_memory"
MEMORY_STEP_TITLE = "Memory"
MEMORY_STEP_ICON = "Brain"

SAVE_FAILURES = SaveFailures()
"""This process's back-off for scopes whose save failed (the store could not record it)."""

StockHistory = Callable[[], Awaitable[list[Message]]]


@dataclass(frozen=True)
class AgentTurn:
    """What the component keeps for one turn: the history it handed the Agent, the engine's `Turn` (None when the
    turn fell back to the stock history), and the report shown as status and memory step."""

    key: tuple[str, ...]
    report: str
    history: tuple[Message, ...] | None = None
    """None when the turn fell back: a later call of the same turn runs it again."""
    turn: Turn | None = None
    pinned_keys: tuple[str, ...] = ()
    seconds: float = 0.0
    previous: FoldResult | None = None
    """The fold that ran after the previous reply, in this process."""
    observer: UsageObserver | None = None
    """Watches this turn's agent calls (`wiring.usage`)."""


def setting(component: Any, name: str) -> Any:
    """An input's value. A flow saved by an older version stores the summary settings hidden while the switch was
    off, and Langflow leaves hidden fields out when it builds the flow: their value is read from the flow instead."""
    # `_parameters`: what Langflow built the component with; a hidden field is missing there.
    parameters = component.__dict__.get("_parameters") or {}
    if name not in parameters:
        field = _saved_template(component).get(name)
        if isinstance(field, dict) and "value" in field:
            return field["value"]
    return getattr(component, name, None)


def _saved_template(component: Any) -> Mapping[str, Any]:
    vertex = component.__dict__.get("_vertex")
    try:
        template = vertex.data["node"]["template"]
    except (AttributeError, KeyError, TypeError):
        return {}
    return template if isinstance(template, Mapping) else {}


def settings_of(component: Any) -> FoldSettings | None:
    """The component's fold settings; None when Number of Chat History Messages is 0 (memory off)."""
    names = (*WHOLE_NUMBER_FIELDS, "pinned_keys", "summary_timeout")
    return settings_from(
        {name: setting(component, name) for name in names},
        summary_model=summary_model_name(component),
        counter=counter_for(agent_model_name(component)),
        prompt_cache=usage.USAGE.caches(agent_model_name(component), agent_model_provider(component)),
    )


def check_settings(
    build_config: Mapping[str, Any], field_name: str, field_value: Any, names: Mapping[str, str] = FIELD_NAMES
) -> None:
    """Refuse a numeric setting that makes no sense when it is edited, with what to change; raises ValueError."""
    switch = (build_config.get("summarize_older_messages") or {}).get("value")
    if field_name == "n_messages" and not switch:
        return
    values = {name: (build_config.get(name) or {}).get("value") for name in (*CHECKED_FIELDS, "pinned_keys")}
    values[field_name] = field_value
    settings_from(values, names=names)


def is_compact_request(component: Any) -> bool:
    if not setting(component, "summarize_older_messages"):
        return False
    text = getattr(component.input_value, "text", component.input_value)
    return isinstance(text, str) and text.strip() == COMPACT_COMMAND


async def memory_data(component: Any, stock_history: StockHistory, *, compact: bool = False) -> list[Message]:
    """The Agent's chat history with the switch on. Runs once per turn; a second call returns the same history."""
    if whole_number(setting(component, "n_messages"), "n_messages") == 0:
        return []
    key = _turn_key(component)
    kept = turn_of(component)
    if kept is not None and kept.key == key and kept.history is not None:
        return list(kept.history)

    from langflow_summarizing_agent.storage.store import DatabaseStore, database_available
    from langflow_summarizing_agent.wiring.messages import as_chat_message

    if not database_available():
        # A warning, not info: `lfx run` shows no component status, but its output carries warnings.
        keep(component, AgentTurn(key, FALLBACK_NOTE), level=logging.WARNING)
        return await stock_history()
    settings = settings_of(component)
    if settings is None:
        return []
    scope = _scope_of(component)
    if scope is None:
        # A summary is kept per flow, owner and session; without both ids Langflow's own reads fail closed too.
        keep(component, AgentTurn(key, NO_SCOPE_NOTE), level=logging.WARNING)
        return await stock_history()

    settings = replace(settings, counter=settings.counter.scaled(usage.USAGE.scale(scope.key)))
    observer = UsageObserver(scope.key, settings.counter, agent_model_name(component), usage.USAGE)
    input_id = _input_id(component)
    store = DatabaseStore(scope, before=input_id)
    summarizer = summarizer_for(lambda: build_summary_model(component), settings.summary_timeout)
    folds = background.FOLDS
    started = time.perf_counter()
    try:
        if compact:
            await folds.wait(scope.key)
            turn = await fold_if_due(store, summarizer, settings, compact=True, failures=SAVE_FAILURES)
        elif folds.running(scope.key):
            # The session's fold after the reply runs or waits for a place here: it folds what is due, so this
            # turn does not wait for a summary call of its own (a fold waiting for a place holds no fold lock).
            turn = replace(await read_and_plan(store, settings, failures=SAVE_FAILURES), busy=True)
        elif folds.enabled:
            turn = await plan_folding_after_reply(store, summarizer, settings)
        else:
            turn = await fold_if_due(store, summarizer, settings, failures=SAVE_FAILURES)
    except Exception as exc:
        logger.exception("Summarizing Agent: the summary store failed; using the last N messages")
        note = f"Summarizing Agent: summary store unavailable ({type(exc).__name__}); used the last N messages."
        keep(component, AgentTurn(key, note))
        return await stock_history()
    seconds = time.perf_counter() - started

    if folds.running(scope.key):
        turn = replace(turn, busy=True, due=None)
    if folds.enabled and not compact:
        # Starts the fold after this reply; hands this turn's job to the session's fold still waiting for a place,
        # or leaves it for after the session's running fold.
        _fold_after_reply(component, DatabaseStore(scope, through=input_id), summarizer, settings, observer)
    history = await history_messages(turn, scope.session_id, as_chat_message)
    previous = folds.take_outcome(scope.key) if folds.enabled else None
    kept = AgentTurn(
        key,
        report.status_text(turn, previous),
        tuple(history),
        turn,
        settings.pinned_keys,
        seconds,
        previous,
        observer,
    )
    keep(component, kept)
    return list(history)


async def plan_folding_after_reply(
    store: Any, summarizer: Any, settings: FoldSettings, *, failures: SaveFailures = SAVE_FAILURES
) -> Turn:
    """Read and plan; a due fold is left for after the reply. Older messages that no longer fit (after a back-off, or
    behind a slow summary model) are counted as not summarized yet until that fold catches up: a turn on
    `langflow run` never waits for a summary call."""
    turn = await read_and_plan(store, settings, failures=failures)
    if not turn.plan.fold:
        return turn
    return replace(turn, due=turn.plan.reason)


def _fold_after_reply(
    component: Any, through_input: Any, summarizer: Any, settings: FoldSettings, observer: UsageObserver | None = None
) -> None:
    """Start the fold in the background once the task building this agent ends, that is once the reply is produced.

    The fold plans the next turn: the session through this turn's input, read from the store, then the reply, taken
    from this agent (Chat Output stores it at a moment no fold can rely on). It folds what is due, and what the next
    turn would have to fold inline (a pasted log that crowds older messages out), before that turn needs it.

    When the Agent's own model folds and its provider caches prompts (`wiring.usage`), the fold asks on the prompt
    the agent just sent and its reply (`engine.prompt.build_fold_prompt_on_prefix`), with the same tools bound, so
    the provider serves that prefix from its cache.

    Hooked on the task, not on the component's code, so flows saved with an earlier version of the component (their
    code is what Langflow runs) fold after the reply too.
    """
    earlier_results = _results_of(component)
    key = through_input.scope.key

    async def fold_with_the_reply() -> FoldResult | None:
        started = time.monotonic()
        upcoming = reply_of(component, earlier_results)
        prefix, fold_summarizer = None, summarizer
        if upcoming and observer is not None and observer.last_call and _folds_on_the_agents_prefix(component):
            prefix = (*observer.last_call.messages, AIMessage(content=upcoming[-1].text))
            fold_summarizer = summarizer_for(
                lambda: build_summary_model(component), settings.summary_timeout, observer.last_call.tools
            )
        turn = await fold_if_due(
            through_input, fold_summarizer, settings, upcoming=upcoming, failures=SAVE_FAILURES, prefix=prefix
        )
        if turn.fold is None:
            for problem in report.problems(turn):
                logger.warning("Summarizing Agent: background fold: %s", problem)
            return None
        return replace(turn.fold, seconds=time.monotonic() - started)

    task = asyncio.current_task()
    if task is None:
        background.FOLDS.start(key, fold_with_the_reply)
        return
    task.add_done_callback(lambda _: background.FOLDS.start(key, fold_with_the_reply))


def _folds_on_the_agents_prefix(component: Any) -> bool:
    """The Agent's own model folds (no Summary Model connected) and its provider caches prompts."""
    if getattr(component, "summary_model", None):
        return False
    return usage.USAGE.caches(agent_model_name(component), agent_model_provider(component))


def usage_callbacks(component: Any) -> list[UsageObserver]:
    """The callbacks this turn adds to the agent's model calls."""
    kept = turn_of(component)
    return [kept.observer] if kept is not None and kept.observer is not None else []


def reply_of(component: Any, earlier_results: object = None) -> tuple[StoredMessage, ...]:
    """The reply this build of the agent produced, as the message Chat Output stores next (the agent's text, as a
    flow that connects the agent to Chat Output stores it); none when the build failed.

    `earlier_results` are the component's results when the turn began: a component built again (in a loop) keeps
    its earlier results until a build succeeds, and a build that failed has no reply of its own.
    """
    results = _results_of(component)
    if not isinstance(results, Mapping) or results is earlier_results:
        return ()
    reply = next((value for value in results.values() if isinstance(value, Message)), None)
    if reply is None or not isinstance(reply.text, str):
        return ()
    return (StoredMessage(id=str(uuid.uuid4()), timestamp=utcnow(), role="assistant", text=reply.text),)


def _results_of(component: Any) -> object:
    try:
        return component.get_results()
    except Exception:  # without the reply the fold plans through the input, as before
        logger.debug("Summarizing Agent: the agent's results could not be read", exc_info=True)
        return None


async def compact_reply(component: Any, stock_history: StockHistory) -> Message:
    """Answer `/compact` without calling the agent."""
    await memory_data(component, stock_history, compact=True)
    kept = turn_of(component)
    turn = kept.turn if kept is not None else None
    keys = pinned_keys_from(setting(component, "pinned_keys"))
    text = report.compact_reply_text(turn, keys, None if turn else report_of(component))
    message = Message(
        text=text,
        sender=MESSAGE_SENDER_AI,
        sender_name=getattr(component, "display_name", None) or MESSAGE_SENDER_AI,
        session_id=component.graph.session_id,
    )
    with_memory_step(component, message)
    component.status = text
    return message


def memory_step(component: Any) -> ToolContent | None:
    """This turn's memory step as one content block of the reply, or None when the switch is off."""
    if not setting(component, "summarize_older_messages"):
        return None
    kept = turn_of(component)
    if kept is None:
        return None
    if kept.turn is not None:
        text = report.memory_step_text(kept.turn, kept.pinned_keys, kept.seconds, previous=kept.previous)
    else:
        text = f"Memory: {kept.report}"
    return ToolContent(
        type="tool_use",
        name=MEMORY_STEP_NAME,
        tool_input={},
        output=text,
        header={"title": MEMORY_STEP_TITLE, "icon": MEMORY_STEP_ICON},
        duration=round(kept.seconds * 1000),
    )


def with_memory_step(component: Any, message: Message) -> Message:
    """`message` with this turn's memory step as its first content block (no step when the switch is off)."""
    step = memory_step(component)
    if step is not None:
        message.content_blocks = [step, *(message.content_blocks or [])]
    return message


def with_report(component: Any, status: Any) -> Any:
    """The component status followed by this turn's report, if there is one."""
    text = report_of(component)
    if not text or (isinstance(status, str) and text in status):
        return status
    return f"{status}\n\n{text}" if isinstance(status, str) and status else text


def turn_of(component: Any) -> AgentTurn | None:
    """What the component keeps for its last turn."""
    return component.__dict__.get(TURN_ATTRIBUTE)


def report_of(component: Any) -> str | None:
    kept = turn_of(component)
    return kept.report if kept is not None else None


def keep(component: Any, kept: AgentTurn, *, level: int = logging.INFO) -> None:
    setattr(component, TURN_ATTRIBUTE, kept)
    logger.log(level, kept.report)
    log = getattr(component, "log", None)
    if callable(log):
        try:
            log(kept.report)
        except Exception:
            logger.debug("component log unavailable", exc_info=True)


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


def _scope_of(component: Any) -> Scope | None:
    from lfx.components.models_and_agents.memory import _safe_graph_user_id
    from lfx.memory.flow_context import coerce_flow_id

    graph = component.graph
    flow_id = getattr(graph, "flow_id", None)
    user_id = _safe_graph_user_id(component)
    if coerce_flow_id(flow_id) is None or user_id is None:
        return None
    context_id = getattr(component, "context_id", None) or None
    return Scope(flow_id, user_id, graph.session_id, context_id)


def _input_id(component: Any) -> str | None:
    value = getattr(getattr(component, "input_value", None), "id", None)
    return str(value) if value else None


def _turn_key(component: Any) -> tuple[str, ...]:
    graph = component.graph
    text = getattr(component.input_value, "text", component.input_value)
    return (str(graph.session_id), str(getattr(graph, "run_id", "")), _input_id(component) or str(text))
