"""The Summarizing Agent's part of a turn: what it hands the turn runner (`wiring.runner`).

The Agent's `get_memory_data()` calls `memory_data()`, and `/compact` calls `compact_reply()`. What is the Agent's
own: its settings read off its inputs, with tokens counted as its model counts them, scaled by the usage its
provider reported for this session, and twice Fold Batch when the provider caches prompts (`wiring.usage`); its
read, which ends before its current input; and what its catch-up after the reply knows, taken as its build ends (the
signal its fold waits for, `wiring.after_reply`): the reply it produced, and, when its own model folds and its
provider caches prompts, the prompt it just sent, for the fold to ask on.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from lfx.schema.content_types import ToolContent
from lfx.schema.message import Message
from lfx.utils.constants import MESSAGE_SENDER_AI

from langflow_summarizing_agent import langflow_private
from langflow_summarizing_agent.engine import report
from langflow_summarizing_agent.engine.fold import Prefix, fold_for_one_call
from langflow_summarizing_agent.engine.plan import COMPACT_COMMAND
from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX, render_summary_message
from langflow_summarizing_agent.engine.records import Scope, StoredMessage, utcnow
from langflow_summarizing_agent.engine.settings import (
    WHOLE_NUMBER_FIELDS,
    FoldSettings,
    settings_from,
    whole_number,
)
from langflow_summarizing_agent.engine.tokens import counter_for
from langflow_summarizing_agent.engine.tool_results import run_start
from langflow_summarizing_agent.wiring import after_reply, long_turn, prompt_cache
from langflow_summarizing_agent.wiring import runtime as runtimes
from langflow_summarizing_agent.wiring.runner import (
    Part,
    cached_history,
    report_of,
    run_compaction,
    run_turn,
    setting,
    turn_of,
)
from langflow_summarizing_agent.wiring.runtime import Runtime
from langflow_summarizing_agent.wiring.summary_model import (
    agent_model_name,
    agent_model_provider,
    summarizer_for,
    summary_model_builder,
    summary_model_name,
)
from langflow_summarizing_agent.wiring.usage import UsageObserver

__all__ = [
    "FALLBACK_NOTE",
    "MEMORY_STEP_NAME",
    "MEMORY_STEP_TITLE",
    "cache_middleware",
    "compact_reply",
    "is_compact_request",
    "long_turn_middleware",
    "memory_data",
    "memory_step",
    "turn_of",
    "usage_callbacks",
    "with_long_turn_note",
    "with_memory_step",
    "with_memory_step_in_reply",
]

logger = logging.getLogger(__name__)

NAME = "Summarizing Agent"
FALLBACK_NOTE = (
    "Summaries need a Langflow database; without one no messages are stored, so there is no chat history, "
    "as with the stock Agent."
)
NO_SCOPE_NOTE = "Summaries need the flow's id and owner; using the last N messages as the stock Agent does."
MEMORY_STEP_NAME = "summarizing_agent_memory"
MEMORY_STEP_TITLE = "Memory"
MEMORY_STEP_ICON = "Brain"
REPLY_SIGNAL_ATTRIBUTE = "_summarizing_reply_signal"
"""The component attribute that holds this turn's reply signal (`after_reply.signal_build_end`)."""
PART_ATTRIBUTE = "_summarizing_part"
"""The component attribute that holds what this turn handed the turn runner, for a retry that folds (`long_turn`)."""
WATCH_ATTRIBUTE = "_summarizing_long_turn"
"""The component attribute that holds what the run did to stay within the model's input limit."""

StockHistory = Callable[[], Awaitable[list[Message]]]


def settings_of(component: Any, runtime: Runtime) -> FoldSettings | None:
    """The component's fold settings; None when Number of Chat History Messages is 0 (memory off)."""
    usage = runtime.usage
    names = (*WHOLE_NUMBER_FIELDS, "pinned_keys", "summary_timeout")
    return settings_from(
        {name: setting(component, name) for name in names},
        summary_model=summary_model_name(component),
        counter=counter_for(agent_model_name(component)),
        prompt_cache=usage.caches(agent_model_name(component), agent_model_provider(component)),
    )


def is_compact_request(component: Any) -> bool:
    if not setting(component, "summarize_older_messages"):
        return False
    text = getattr(component.input_value, "text", component.input_value)
    return isinstance(text, str) and text.strip() == COMPACT_COMMAND


async def memory_data(component: Any, stock_history: StockHistory) -> list[Message]:
    """The Agent's chat history with the switch on. Runs once per turn; a second call returns the same history."""
    runtime = runtimes.current()
    part = _part(component, runtime)
    if part is None:
        return []
    kept = cached_history(component, part.key)
    if kept is not None:
        return list(kept)
    earlier_results = _results_of(component)
    component.__dict__[PART_ATTRIBUTE] = part
    history = await run_turn(component, part, runtime=runtime)
    if history is None:
        return await stock_history()
    if part.scope is not None and isinstance(runtime.timing, after_reply.AfterReply):
        take = functools.partial(_reply_of_the_build, component, part, earlier_results, runtime)
        signal = after_reply.signal_build_end(runtime.timing, part.scope.key, part.key, take)
        component.__dict__[REPLY_SIGNAL_ATTRIBUTE] = signal
    return history


def reply_built(component: Any, message: object) -> None:
    """The Agent's `message_response` returned `message`, its final reply: the catch-up after it may start."""
    signal = component.__dict__.pop(REPLY_SIGNAL_ATTRIBUTE, None)
    if signal is not None:
        signal(message)


async def compact_reply(component: Any, stock_history: StockHistory) -> Message:
    """Answer `/compact` without calling the agent."""
    runtime = runtimes.current()
    part = _part(component, runtime)
    if part is not None:
        await run_compaction(component, part, runtime=runtime)
    kept = turn_of(component)
    turn = kept.turn if kept is not None else None
    keys = part.settings.pinned_keys if part is not None else ()
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


def _part(component: Any, runtime: Runtime) -> Part | None:
    """What the Agent hands the turn runner; None when Number of Chat History Messages is 0 (no history)."""
    if whole_number(setting(component, "n_messages"), "n_messages") == 0:
        return None
    settings = settings_of(component, runtime)
    if settings is None:
        return None
    scope = _scope_of(component)
    observer = None
    if scope is not None:
        settings = replace(settings, counter=settings.counter.scaled(runtime.usage.scale(scope.key)))
        observer = UsageObserver(scope.key, settings.counter, agent_model_name(component), runtime.usage)
    input_id = _input_id(component)
    return Part(
        name=NAME,
        key=_turn_key(component),
        scope=scope,
        settings=settings,
        summarizer=summarizer_for(summary_model_builder(component), settings.summary_timeout),
        fallback_note=FALLBACK_NOTE,
        no_scope_note=NO_SCOPE_NOTE,
        before=input_id,
        through=input_id,
        signal=after_reply.ReplySignal.BUILD_END,
        observer=observer,
    )


def _reply_of_the_build(
    component: Any, part: Part, earlier_results: object, runtime: Runtime, message: object
) -> after_reply.Reply:
    """What the catch-up after the reply knows, taken as the Agent's build ends: the reply it produced, `message` or
    else its built results (Chat Output stores it at a moment no fold can rely on), and, when the Agent's own model
    folds and its provider caches prompts (`wiring.usage`), the prompt the agent just sent with that reply, for the fold
    to ask on with the same tools bound and tool calls turned off (`engine.prompt.build_fold_prompt_on_prefix`), which
    the provider serves from its cache."""
    upcoming = _as_reply(message) if message is not None else reply_of(component, earlier_results)
    call = part.observer.last_call if part.observer is not None else None
    if not (upcoming and call is not None and _folds_on_the_agents_prefix(component, runtime)):
        return after_reply.Reply(upcoming)
    build = summary_model_builder(component)
    model = functools.partial(_on_the_agents_prefix, build, call.cache_control)
    summarizer = summarizer_for(model, part.settings.summary_timeout, call.tools)
    return after_reply.Reply(upcoming, Prefix((*call.messages, AIMessage(content=upcoming[-1].text)), summarizer))


def _on_the_agents_prefix(build: Callable[[], Any], cache_control: object) -> Any:
    return prompt_cache.on_the_agents_prefix(build(), cache_control)


def _folds_on_the_agents_prefix(component: Any, runtime: Runtime) -> bool:
    """The Agent's own model folds (no Summary Model connected) and its provider caches prompts."""
    if getattr(component, "summary_model", None):
        return False
    return runtime.usage.caches(agent_model_name(component), agent_model_provider(component))


def long_turn_middleware(component: Any, llm: object) -> list[Any]:
    """The middleware that keeps the run's calls within the model's input limit (`wiring.long_turn`), with the switch
    on; none with it off. Refuses a History Token Budget above the limit."""
    if not setting(component, "summarize_older_messages"):
        return []
    given = long_turn.model_input_limit(setting(component, "model_input_limit"))
    limit, source = long_turn.input_limit(given, llm)
    budget = whole_number(setting(component, "history_token_budget"), "history_token_budget") or 0
    long_turn.check_budget(budget, limit, source)
    kept = turn_of(component)
    counter = (
        kept.turn.counter if kept is not None and kept.turn is not None else counter_for(agent_model_name(component))
    )
    watch = long_turn.LongTurnWatch(limit, source)
    component.__dict__[WATCH_ATTRIBUTE] = watch
    return [long_turn.LongTurnMiddleware(counter, watch, functools.partial(_history_cut, component))]


async def _history_cut(component: Any, messages: list[BaseMessage]) -> list[BaseMessage] | None:
    """`messages` with the history down to the summary message and the newest exchange, the window messages left out
    folded into the summary for this call (`long_turn.HistoryCut`); None when nothing can be left out, or the fold
    failed, so no message leaves what is sent unfolded."""
    kept, part = turn_of(component), component.__dict__.get(PART_ATTRIBUTE)
    if kept is None or kept.turn is None or part is None:
        return None
    turn, at = kept.turn, run_start(messages) - 1
    history = messages[:at]
    has_summary = bool(history) and str(history[0].content).startswith(SUMMARY_PREFIX)
    window = history[1:] if has_summary else history
    sent = turn.plan.send
    if len(window) != len(sent) or len(sent) <= 2:
        return None
    try:
        summary = await fold_for_one_call(turn.summary, sent[:-2], part.settings, part.summarizer)
    except Exception:  # a failed fold leaves the history as it was
        logger.warning("Summarizing Agent: the fold for a retried call failed; the history stays", exc_info=True)
        return None
    text = render_summary_message(summary, part.settings.pinned_keys, turn.plan.not_summarized)
    return [*([HumanMessage(content=text)] if text else []), *window[-2:], *messages[at:]]


def long_turn_note(component: Any) -> str | None:
    watch = component.__dict__.get(WATCH_ATTRIBUTE)
    return watch.note() if watch is not None else None


def with_long_turn_note(component: Any, status: Any) -> Any:
    """The component status followed by what the run did to stay within the model's input limit, if anything."""
    note = long_turn_note(component)
    if not note:
        return status
    return f"{status}\n\n{note}" if isinstance(status, str) and status else note


def cache_middleware(component: Any, llm: object) -> list[Any]:
    """The agent's cache breakpoints (`wiring.prompt_cache`), with the switch on; none with it off."""
    return prompt_cache.agent_middleware(llm) if setting(component, "summarize_older_messages") else []


def usage_callbacks(component: Any) -> list[UsageObserver]:
    """The callbacks this turn adds to the agent's model calls."""
    kept = turn_of(component)
    return [kept.observer] if kept is not None and kept.observer is not None else []


def _as_reply(message: object) -> tuple[StoredMessage, ...]:
    text = getattr(message, "text", None)
    if not isinstance(text, str):
        return ()
    return (StoredMessage(id=str(uuid.uuid4()), timestamp=utcnow(), role="assistant", text=text),)


def reply_of(component: Any, earlier_results: object = None) -> tuple[StoredMessage, ...]:
    """The reply this build of the agent produced, as the message Chat Output stores next (the agent's text, as a
    flow that connects the agent to Chat Output stores it); none when the build failed.

    `earlier_results` are the component's results when the turn began: a component built again (in a loop) keeps
    its earlier results until a build succeeds, and a build that failed has no reply of its own.
    """
    results = _results_of(component)
    if not isinstance(results, Mapping) or results is earlier_results:
        return ()
    return _as_reply(next((value for value in results.values() if isinstance(value, Message)), None))


def _results_of(component: Any) -> object:
    try:
        return component.get_results()
    except Exception:  # without the reply the fold plans through the input, as before
        logger.debug("Summarizing Agent: the agent's results could not be read", exc_info=True)
        return None


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
    note = long_turn_note(component)
    if note:
        text += report.step_item(note)
    return ToolContent(
        type="tool_use",
        name=MEMORY_STEP_NAME,
        tool_input={},
        output=text,
        header={"title": MEMORY_STEP_TITLE, "icon": MEMORY_STEP_ICON},
        duration=round(kept.seconds * 1000),
    )


def with_memory_step(component: Any, message: Message) -> Message:
    """`message` with this turn's memory step as its first content block, as it stands now (no step when the switch is
    off)."""
    step = memory_step(component)
    if step is not None:
        others = [block for block in message.content_blocks or [] if getattr(block, "name", None) != MEMORY_STEP_NAME]
        message.content_blocks = [step, *others]
    return message


def with_memory_step_in_reply(component: Any, message: Message) -> Message:
    """The agent's reply as it is sent during the run, with this turn's memory step first, except when it is sent
    first, before it holds anything. Langflow reads that first stored reply back in its v1 shape, where a lone step
    becomes a group, and the run's tool calls appended after a group are left out of what is stored and shown. From
    the next send on, the step goes first, with what the run has done to stay within the model's input limit."""
    if getattr(message, "sender", None) != MESSAGE_SENDER_AI:
        return message
    properties = message.properties
    state = properties.get("state") if isinstance(properties, dict) else getattr(properties, "state", None)
    if state == "partial" and not message.content_blocks:
        return message
    return with_memory_step(component, message)


def _scope_of(component: Any) -> Scope | None:
    from lfx.memory.flow_context import coerce_flow_id

    graph = component.graph
    flow_id = getattr(graph, "flow_id", None)
    user_id = langflow_private.graph_user_id(component)
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
