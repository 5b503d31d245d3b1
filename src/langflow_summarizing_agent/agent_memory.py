"""Langflow wiring of the fold: turns the component's inputs into a fold, and a fold into the Agent's history.

The component calls `summarized_memory_data()` from `get_memory_data()` and `compact_reply()` for `/compact`.
Failures of the summary or of the database never block a turn: they fall back to the stock last-N history.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from langchain_core.messages import BaseMessage
from lfx.schema.content_types import ToolContent
from lfx.schema.message import Message
from lfx.utils.constants import MESSAGE_SENDER_AI, MESSAGE_SENDER_NAME_USER, MESSAGE_SENDER_USER

from langflow_summarizing_agent import background
from langflow_summarizing_agent.background import FoldOutcome
from langflow_summarizing_agent.fold import (
    COMPACT_COMMAND,
    COMPACT_REPLY_PREFIX,
    Folder,
    FoldSettings,
    SaveFailures,
    TurnHistory,
)
from langflow_summarizing_agent.state import StoredMessage, utcnow

logger = logging.getLogger(__name__)

MAX_PINNED_KEYS = 20
PINNED_KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")
DEFAULT_SUMMARY_TIMEOUT_SECONDS = 60.0
FALLBACK_NOTE = (
    "Summaries need a Langflow database; without one no messages are stored, so there is no chat history, "
    "as with the stock Agent."
)
NO_SCOPE_NOTE = "Summaries need the flow's id and owner; using the last N messages as the stock Agent does."

SETTING_NAMES = {
    "n_messages": "Number of Chat History Messages",
    "summarize_older_messages": "Summarize Older Messages",
    "pinned_keys": "Pinned Keys",
    "summary_model": "Summary Model",
    "fold_batch": "Fold Batch",
    "summary_words": "Summary Word Budget",
    "history_token_budget": "History Token Budget",
    "max_folds_per_turn": "Max Folds per Turn",
    "summary_timeout": "Summary Timeout (s)",
}
"""Each input's name as the UI shows it; error messages use these."""
N_MESSAGES_INFO = (
    "Messages sent word for word: the newest N - 1 messages before the input (the input takes one slot). Older "
    "messages reach the model through the summary. 0 turns memory off, summary included."
)
"""Help of Number of Chat History Messages while Summarize Older Messages is on."""
CHECKED_SETTINGS = (
    "n_messages",
    "fold_batch",
    "summary_words",
    "history_token_budget",
    "max_folds_per_turn",
    "summary_timeout",
)
"""Numeric settings checked when edited in the UI."""

MEMORY_STEP_NAME = "summarizing_agent_memory"
MEMORY_STEP_TITLE = "Memory"
MEMORY_STEP_ICON = "Brain"
MEMORY_STEP_SEPARATOR = "\n· "
"""Several lines: the Playground shows such a step text as wrapped prose, and a single line in a box that does not
wrap."""

FOLD_BUSY_NOTE = "A summary is being updated; this turn used the previous one"

StockHistory = Callable[[], Awaitable[list[Message]]]

SAVE_FAILURES = SaveFailures()
"""This process's back-off for scopes whose save failed (the store could not record it)."""


def clean_pinned_keys(raw: Any) -> tuple[str, ...]:
    """Pinned key names from the input: blanks dropped, duplicates merged, anything else refused clearly."""
    if raw is None or raw == "":
        return ()
    items = [raw] if isinstance(raw, str) else list(raw)
    keys: list[str] = []
    for item in items:
        key = str(getattr(item, "text", item)).strip()
        if not key or key in keys:
            continue
        if not PINNED_KEY_PATTERN.match(key):
            msg = (
                f"Pinned Keys: {key[:80]!r} is not usable as a key. Use a short name of letters, digits, '_', '.' "
                "or '-' that starts with a letter or '_', for example project_id."
            )
            raise ValueError(msg)
        keys.append(key)
    if len(keys) > MAX_PINNED_KEYS:
        msg = f"Pinned Keys: {len(keys)} keys given; keep at most {MAX_PINNED_KEYS} so the summary stays small."
        raise ValueError(msg)
    return tuple(keys)


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


def fold_settings_from(component: Any, summary_model_name: str | None) -> FoldSettings:
    return FoldSettings(
        n_messages=_int(component, "n_messages", 100),
        pinned_keys=clean_pinned_keys(setting(component, "pinned_keys")),
        fold_batch=_int(component, "fold_batch", FoldSettings.fold_batch),
        summary_words=_int(component, "summary_words", FoldSettings.summary_words),
        history_token_budget=_int(component, "history_token_budget", FoldSettings.history_token_budget),
        max_folds_per_turn=_int(component, "max_folds_per_turn", FoldSettings.max_folds_per_turn),
        summary_model=summary_model_name,
    )


def _int(component: Any, name: str, default: int) -> int:
    return _whole_number(setting(component, name), name, default)


def _whole_number(value: Any, name: str, default: int) -> int:
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        msg = f"{SETTING_NAMES[name]} must be a whole number, got {value!r}."
        raise ValueError(msg) from None


def summary_timeout_of(value: Any) -> float:
    """Summary Timeout (s) from its input; 0 or empty is the default."""
    try:
        timeout = float(value) if value not in (None, "") else 0.0
    except (TypeError, ValueError):
        msg = f"{SETTING_NAMES['summary_timeout']} must be a number of seconds, got {value!r}."
        raise ValueError(msg) from None
    if timeout < 0 or not math.isfinite(timeout):
        msg = (
            f"{SETTING_NAMES['summary_timeout']} must be a positive number of seconds; "
            f"0 uses the default ({DEFAULT_SUMMARY_TIMEOUT_SECONDS:g})."
        )
        raise ValueError(msg)
    return timeout or DEFAULT_SUMMARY_TIMEOUT_SECONDS


def check_settings(build_config: Mapping[str, Any], field_name: str, field_value: Any) -> None:
    """Refuse a numeric setting that makes no sense when it is edited, with what to change; raises ValueError."""
    values = {name: (build_config.get(name) or {}).get("value") for name in CHECKED_SETTINGS}
    values[field_name] = field_value
    switch = (build_config.get("summarize_older_messages") or {}).get("value")
    if field_name == "n_messages" and not switch:
        return
    n_messages = _whole_number(values["n_messages"], "n_messages", 100)
    if n_messages < 0:
        msg = f"{SETTING_NAMES['n_messages']} must be 0 (no memory) or more, got {n_messages}."
        raise ValueError(msg)
    summary_timeout_of(values["summary_timeout"])
    pinned = (build_config.get("pinned_keys") or {}).get("value")
    FoldSettings(
        n_messages=max(n_messages, 1),
        pinned_keys=clean_pinned_keys(pinned),
        fold_batch=_whole_number(values["fold_batch"], "fold_batch", FoldSettings.fold_batch),
        summary_words=_whole_number(values["summary_words"], "summary_words", FoldSettings.summary_words),
        history_token_budget=_whole_number(
            values["history_token_budget"], "history_token_budget", FoldSettings.history_token_budget
        ),
        max_folds_per_turn=_whole_number(
            values["max_folds_per_turn"], "max_folds_per_turn", FoldSettings.max_folds_per_turn
        ),
    )


def _input_id(component: Any) -> str | None:
    value = getattr(getattr(component, "input_value", None), "id", None)
    return str(value) if value else None


def _turn_key(component: Any) -> tuple[str, ...]:
    graph = component.graph
    text = getattr(component.input_value, "text", component.input_value)
    return (str(graph.session_id), str(getattr(graph, "run_id", "")), _input_id(component) or str(text))


def build_summary_model(component: Any) -> Any:
    """The model that folds: the Summary Model input if connected, else the Agent's own, with streaming off.

    Built as `AgentComponent.get_agent_requirements()` builds the Agent's model (`_resolve_selected_model`, then
    `_get_llm`'s `get_llm` call: provider policy, API key from the flow or the user's global variable, Max Tokens,
    watsonx settings, remediation overrides); only `stream` differs, as fold tokens must not stream.
    """
    connected = getattr(component, "summary_model", None)
    if connected:
        return connected
    from lfx.base.models.unified_models import get_llm

    return get_llm(
        model=component._resolve_selected_model(),
        user_id=component.user_id,
        api_key=getattr(component, "api_key", None),
        stream=False,
        max_tokens=component._get_max_tokens_value(),
        watsonx_url=getattr(component, "base_url_ibm_watsonx", None),
        watsonx_project_id=getattr(component, "project_id", None),
        overrides=getattr(component, "_model_overrides", None),
    )


def summary_model_name(component: Any) -> str | None:
    """The summary model's name for the state, read off the inputs: nothing is built for it."""
    connected = getattr(component, "summary_model", None)
    if connected:
        return model_name_of(connected)
    model = getattr(component, "model", None)
    if isinstance(model, list):
        selected = model[0] if model else None
        name = selected.get("name") if isinstance(selected, dict) else None
        return name if isinstance(name, str) and name else None
    # A string here is no model (nothing selected, or "connect_other_models" with nothing connected).
    if model is None or isinstance(model, str):
        return None
    return model_name_of(model)


def model_name_of(llm: Any) -> str | None:
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(llm, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(llm).__name__ if llm is not None else None


def make_summarizer(
    build_model: Callable[[], Any], timeout_seconds: float
) -> Callable[[list[BaseMessage]], Awaitable[str]]:
    """A summarizer that builds its model on its first call, so a turn that does not fold never builds one."""
    llm: Any = None

    async def summarize(prompt: list[BaseMessage]) -> str:
        nonlocal llm
        if llm is None:
            # Raised here, a build error (no API key, say) is a failed fold with back-off, never a failed turn.
            try:
                llm = build_model()
            except Exception as exc:
                msg = (
                    f"the summary model could not be built ({exc}); connect a Summary Model or fix the "
                    "Language Model's settings"
                )
                raise RuntimeError(msg) from exc
        # No callbacks: fold tokens must never reach the Playground stream or the agent's trace.
        try:
            response = await asyncio.wait_for(
                llm.ainvoke(prompt, config={"callbacks": [], "run_name": "summarizing_agent_fold"}),
                timeout=timeout_seconds,
            )
        except asyncio.TimeoutError:
            msg = f"no answer within {timeout_seconds:g} s; raise Summary Timeout if the summary model is this slow"
            raise TimeoutError(msg) from None
        return _text_of(response)

    return summarize


def _text_of(response: Any) -> str:
    content = getattr(response, "content", response)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content if part is not None
        )
    return str(content or "")


async def to_agent_history(
    turn: TurnHistory, session_id: str, as_chat_message: Callable[[StoredMessage], Awaitable[Message]]
) -> list[Message]:
    """`[summary message, *verbatim]` as lfx Messages; the summary is user-role and has no id (never stored)."""
    history: list[Message] = []
    if turn.summary_text:
        history.append(
            Message(
                text=turn.summary_text,
                sender=MESSAGE_SENDER_USER,
                sender_name=MESSAGE_SENDER_NAME_USER,
                session_id=session_id,
            )
        )
    for message in turn.verbatim:
        if message.payload is not None:
            history.append(await as_chat_message(message))
        else:
            # A message cut to fit the budget: a new, unstored Message with the cut text.
            sender = MESSAGE_SENDER_USER if message.role == "user" else MESSAGE_SENDER_AI
            history.append(Message(text=message.text, sender=sender, sender_name=sender, session_id=session_id))
    return history


def describe_turn(turn: TurnHistory, previous: FoldOutcome | None = None) -> str:
    """The status: what the model got, against sending the whole conversation verbatim, then what this turn did.
    `previous` is the fold that ran in the background after the previous turn, if this process ran one."""
    sentences = [
        f"The model got: {_what_was_sent(turn)}, ~{turn.history_tokens:,} tokens",
        f"Sending the whole conversation verbatim would take ~{turn.verbatim_history_tokens:,} tokens",
    ]
    if previous is not None:
        sentences.append(describe_background_fold(previous))
    if turn.folded and turn.inline_fold:
        sentences.append(
            f"This turn folded {turn.folded} messages in {_calls(turn.fold_calls)}: older messages could not reach "
            "the model otherwise"
        )
    elif turn.folded:
        sentences.append(f"This turn folded {turn.folded} messages in {_calls(turn.fold_calls)}")
    if turn.fold_busy:
        sentences.append(FOLD_BUSY_NOTE)
    if turn.fold_due:
        sentences.append(f"A fold is due ({turn.fold_due}); the summary is updated in the background after this reply")
    if turn.not_summarized:
        sentences.append(f"{turn.not_summarized} earlier messages are not summarized yet")
    if turn.problems:
        sentences.append("Problems: " + "; ".join(turn.problems))
    return "Summarizing Agent. " + ". ".join(sentences) + "."


def _what_was_sent(turn: TurnHistory) -> str:
    recent = f"{len(turn.verbatim)} recent messages verbatim"
    if not turn.state.folded_count:
        return f"no summary yet, {recent}"
    return f"summary covering {turn.state.folded_count} messages plus {recent}"


def _calls(count: int) -> str:
    return f"{count} summary call" + ("" if count == 1 else "s")


def memory_step_text(
    turn: TurnHistory,
    pinned_keys: Sequence[str],
    seconds: float,
    now: datetime | None = None,
    previous: FoldOutcome | None = None,
) -> str:
    """The Playground's memory step: counts, token estimates and pinned key names; never the summary or a value."""
    state = turn.state
    parts = [
        f"summary covers {state.folded_count} earlier messages" if state.folded_count else "no summary yet",
        f"{len(turn.verbatim)} recent messages verbatim",
    ]
    pinned = [key for key in pinned_keys if state.pinned.get(key)]
    if pinned:
        parts.append("pinned: " + ", ".join(pinned))
    if previous is not None:
        parts.append(describe_background_fold(previous).lower())
    if turn.folded:
        parts.append(f"folded {turn.folded} messages this turn ({_calls(turn.fold_calls)}, {seconds:.1f} s)")
    if turn.fold_busy:
        parts.append(FOLD_BUSY_NOTE.lower())
    if turn.fold_due:
        parts.append("summary update runs after this reply")
    if turn.not_summarized:
        parts.append(f"{turn.not_summarized} earlier messages not summarized yet")
    if state.failed_folds:
        times = "once" if state.failed_folds == 1 else f"{state.failed_folds} times"
        parts.append(f"summary update failed {times}; next try {_next_try(state.retry_after, now or utcnow())}")
    parts.append(
        f"~{turn.history_tokens:,} history tokens sent; the whole conversation verbatim: "
        f"~{turn.verbatim_history_tokens:,}"
    )
    return "Memory: " + MEMORY_STEP_SEPARATOR.join(parts)


def _next_try(retry_after: datetime | None, now: datetime) -> str:
    if retry_after is None or retry_after <= now:
        return "on the next turn"
    seconds = (retry_after - now).total_seconds()
    if seconds < 60:
        return f"in {math.ceil(seconds)} s"
    if seconds < 3600:
        return f"in {math.ceil(seconds / 60)} min"
    return f"in {math.ceil(seconds / 3600)} h"


def memory_step(component: Any) -> ToolContent | None:
    """This turn's memory step as one content block of the reply, or None when the switch is off."""
    if not setting(component, "summarize_older_messages"):
        return None
    turn = last_turn(component)
    seconds = getattr(component, "_summarizing_seconds", 0.0)
    if turn is not None:
        previous = getattr(component, "_summarizing_previous_fold", None)
        text = memory_step_text(turn, clean_pinned_keys(setting(component, "pinned_keys")), seconds, previous=previous)
    elif report_of(component):
        text = f"Memory: {report_of(component)}"
    else:
        return None
    return ToolContent(
        type="tool_use",
        name=MEMORY_STEP_NAME,
        tool_input={},
        output=text,
        header={"title": MEMORY_STEP_TITLE, "icon": MEMORY_STEP_ICON},
        duration=round(seconds * 1000),
    )


def with_memory_step(component: Any, message: Message) -> Message:
    """`message` with this turn's memory step as its first content block (no step when the switch is off)."""
    step = memory_step(component)
    if step is not None:
        message.content_blocks = [step, *(message.content_blocks or [])]
    return message


async def summarized_memory_data(
    component: Any, stock_history: StockHistory, *, compact: bool = False
) -> list[Message]:
    """The Agent's chat history with the switch on. Runs the fold at most once per turn."""
    if _int(component, "n_messages", 100) == 0:
        return []
    key = _turn_key(component)
    cached = getattr(component, "_summarizing_turn", None)
    if cached is not None and cached[0] == key:
        return list(cached[1])

    from langflow_summarizing_agent import session_memory

    if not session_memory.session_memory_supported():
        # A warning, not info: `lfx run` shows no component status, but its output carries warnings.
        _report(component, FALLBACK_NOTE, level=logging.WARNING)
        return await stock_history()

    settings = fold_settings_from(component, summary_model_name(component))
    timeout = summary_timeout_of(setting(component, "summary_timeout"))
    graph = component.graph
    from lfx.components.models_and_agents.memory import _safe_graph_user_id
    from lfx.memory.flow_context import coerce_flow_id

    flow_id = getattr(graph, "flow_id", None)
    user_id = _safe_graph_user_id(component)
    if coerce_flow_id(flow_id) is None or user_id is None:
        # A summary is kept per flow, owner and session; without both ids Langflow's own reads fail closed too.
        _report(component, NO_SCOPE_NOTE, level=logging.WARNING)
        return await stock_history()

    input_id = _input_id(component)
    context_id = getattr(component, "context_id", None) or None
    store = session_memory.LangflowStore().session(
        flow_id=flow_id,
        user_id=user_id,
        session_id=graph.session_id,
        context_id=context_id,
        exclude_ids=(input_id,) if input_id else (),
    )
    summarizer = make_summarizer(lambda: build_summary_model(component), timeout)
    folder = Folder(store, summarizer, settings, save_failures=SAVE_FAILURES)
    folds = background.FOLDS
    started = time.perf_counter()
    try:
        if compact:
            await folds.wait(store.key)
            turn = await folder.prepare_history(compact=True)
        elif folds.enabled:
            turn = await folder.prepare_history_folding_later()
        else:
            turn = await folder.prepare_history()
    except Exception as exc:
        logger.exception("Summarizing Agent: session memory failed; using the last N messages")
        _report(component, f"Summarizing Agent: session memory unavailable ({type(exc).__name__}); used the last N.")
        return await stock_history()

    component._summarizing_seconds = time.perf_counter() - started
    if folds.running(store.key):
        turn.fold_busy, turn.fold_due = True, None
    elif folds.enabled and not compact:
        # After the reply a fold plans the next turn: the session through this turn's input, read from the store,
        # then the reply, taken from this agent (Chat Output stores it at a moment no fold can rely on). It folds
        # what is due, and what the next turn would have to fold inline (a pasted log that crowds older messages
        # out), before that turn needs it.
        through_input = session_memory.LangflowStore().session(
            flow_id=flow_id, user_id=user_id, session_id=graph.session_id, context_id=context_id, until_id=input_id
        )
        folder_after = Folder(through_input, summarizer, settings, save_failures=SAVE_FAILURES)
        earlier_results = _results_of(component)
        fold_after(store.key, lambda: folder_after.prepare_history(upcoming=reply_of(component, earlier_results)))
    history = await to_agent_history(turn, str(graph.session_id), session_memory.as_chat_message)
    component._summarizing_turn = (key, history, turn)
    component._summarizing_previous_fold = folds.take_outcome(store.key) if folds.enabled else None
    _report(component, describe_turn(turn, component._summarizing_previous_fold))
    return list(history)


def fold_after(key: tuple[str, ...], fold: Callable[[], Awaitable[TurnHistory]]) -> None:
    """Start `fold` in the background once the task building this agent ends, that is once the reply is produced.

    Hooked on the task, not on the component's code, so flows saved with an earlier version of the component (their
    code is what Langflow runs) fold after the reply too.
    """
    task = asyncio.current_task()
    if task is None:
        background.FOLDS.start(key, fold)
        return
    task.add_done_callback(lambda _: background.FOLDS.start(key, fold))


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


def last_turn(component: Any) -> TurnHistory | None:
    cached = getattr(component, "_summarizing_turn", None)
    return cached[2] if cached is not None else None


def _report(component: Any, text: str, *, level: int = logging.INFO) -> None:
    component._summarizing_report = text
    logger.log(level, text)
    log = getattr(component, "log", None)
    if callable(log):
        try:
            log(text)
        except Exception:
            logger.debug("component log unavailable", exc_info=True)


def report_of(component: Any) -> str | None:
    return getattr(component, "_summarizing_report", None)


def with_report(component: Any, status: Any) -> Any:
    """The component status followed by this turn's memory report, if there is one."""
    report = report_of(component)
    if not report or (isinstance(status, str) and report in status):
        return status
    return f"{status}\n\n{report}" if isinstance(status, str) and status else report


def is_compact_request(component: Any) -> bool:
    if not setting(component, "summarize_older_messages"):
        return False
    text = getattr(component.input_value, "text", component.input_value)
    return isinstance(text, str) and text.strip() == COMPACT_COMMAND


def describe_background_fold(outcome: FoldOutcome) -> str:
    if outcome.problems:
        return "The summary update after the previous turn failed: " + "; ".join(outcome.problems)
    return (
        f"Summary updated in the background after the previous turn: folded {outcome.folded} messages "
        f"({_calls(outcome.calls)}, {outcome.seconds:.1f} s)"
    )


def compact_reply_text(turn: TurnHistory | None, pinned_keys: Sequence[str], fallback_note: str | None) -> str:
    if turn is None:
        return f"{COMPACT_REPLY_PREFIX} nothing was folded. {fallback_note or ''}".strip()
    # Key names only: the reply is stored and shown like any message, and pinned values stay out of both.
    pinned = ", ".join(k for k in pinned_keys if turn.state.pinned.get(k)) or "none set"
    if turn.problems:
        outcome = f"the summary call failed, nothing was folded ({'; '.join(turn.problems)})"
    elif turn.folded:
        outcome = f"folded {turn.folded} messages into the summary"
    else:
        outcome = "nothing older than the recent window to fold"
    return (
        f"{COMPACT_REPLY_PREFIX} {outcome}. The summary now covers {turn.state.folded_count} messages; "
        f"{len(turn.verbatim)} recent messages stay verbatim. Pinned: {pinned}."
    )


async def compact_reply(component: Any, stock_history: StockHistory) -> Message:
    """Answer `/compact` without calling the agent."""
    await summarized_memory_data(component, stock_history, compact=True)
    turn = last_turn(component)
    keys = clean_pinned_keys(setting(component, "pinned_keys"))
    text = compact_reply_text(turn, keys, None if turn else report_of(component))
    message = Message(
        text=text,
        sender=MESSAGE_SENDER_AI,
        sender_name=getattr(component, "display_name", None) or MESSAGE_SENDER_AI,
        session_id=component.graph.session_id,
    )
    with_memory_step(component, message)
    component.status = text
    return message
