"""The tool results of one run: which of them are cleared so that the run's model calls stay within the model's input
limit.

An agent run sends every tool call and result of the run back on each model call. Past `TRIM_AT` of the input limit,
a call clears the run's oldest tool results, down to `TRIM_TO`: each result is replaced by `placeholder()`, which
names the tool; the tool calls, the results answering the newest model answer, the user's message and the history
stay. No call is sent with a tool call that lacks its result or a result that lacks its call: only a result's content
changes.

The rule is LangChain's `ClearToolUsesEdit` (oldest first, the newest kept, a marker in `response_metadata`), with a
step. `ClearToolUsesEdit` reclaims a fixed number of tokens on every call past its trigger, so a long run still grows
past the window, and the cleared results change on every call. Here a trim frees up to `TRIM_AT - TRIM_TO` of the
input limit at once (as far as older results go); the calls after it add new results to an unchanged start, which
the provider's prompt cache reads, until the run passes `TRIM_AT` again. The rule is replayed from the run's first
call on every call, so each call clears what the calls before it cleared at the same limit, and no state is kept
between calls (a call refused for its length lowers the limit for the calls after it: `wiring.long_turn`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

TRIM_AT = 0.75
"""A model call that would carry more than this share of the input limit clears older tool results first. The rest
holds the reply and the newest result: one call adds one answer and its results."""
TRIM_TO = 0.40
"""What a trim clears down to: a trim frees up to 35% of the input limit, so the prompt cache breaks once per that many
tokens of new results, not on every call."""
STRATEGY = "summarizing_agent_clear_tool_results"
"""The marker set in a cleared result's `response_metadata["context_editing"]["strategy"]`."""

Count = Callable[[Sequence[BaseMessage]], int]
"""Tokens of a model call that sends these messages (the system prompt and the tools included)."""


def placeholder(tool: str, tokens: int) -> str:
    """What the model sees instead of a cleared result."""
    return (
        f"[{tool} result cleared: {tokens} tokens, dropped to keep this turn within the model's input limit; "
        f"call {tool} again if you need it]"
    )


@dataclass(frozen=True)
class Trim:
    """One model call's messages once older tool results are cleared."""

    messages: list[BaseMessage]
    cleared: int = 0
    """Tool results cleared in this call."""
    saved_tokens: int = 0
    """Tokens the cleared results would have taken."""
    tokens: int = 0
    """Tokens of the call as sent."""


def trim_tool_results(messages: Sequence[BaseMessage], count: Count, limit: int) -> Trim:
    """`messages` with the run's older tool results cleared as each call of the run cleared them (the module's rule)."""
    sizes = _Sizes(messages, count)
    trigger, target = int(limit * TRIM_AT), int(limit * TRIM_TO)
    cleared: list[int] = []
    for end in _call_ends(messages):
        total = sizes.total(end, cleared)
        if total <= trigger:
            continue
        for index in _clearable(messages, end, cleared):
            if total <= target:
                break
            total -= sizes.freed(index)
            cleared.append(index)
    return sizes.applied(cleared)


def clear_all_but_newest(messages: Sequence[BaseMessage], count: Count) -> Trim:
    """`messages` with every tool result of the run cleared but those answering the newest model answer: what a call
    refused for its length is retried with first."""
    sizes = _Sizes(messages, count)
    return sizes.applied(list(_clearable(messages, len(messages), [])))


def run_start(messages: Sequence[BaseMessage]) -> int:
    """Index of the run's first message after the user's: the run's model answers and tool results follow it."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return index + 1
    return 0


def _call_ends(messages: Sequence[BaseMessage]) -> list[int]:
    """Where each model call of the run ended its messages: before each of the run's model answers, and this call."""
    start = run_start(messages)
    return [i for i in range(start, len(messages)) if isinstance(messages[i], AIMessage)] + [len(messages)]


def _clearable(messages: Sequence[BaseMessage], end: int, cleared: Sequence[int]) -> list[int]:
    """The run's tool results before `end`, oldest first, not cleared yet, except those answering the newest answer."""
    start = run_start(messages)
    newest = next((i for i in range(end - 1, start - 1, -1) if isinstance(messages[i], AIMessage)), None)
    kept = {call["id"] for call in messages[newest].tool_calls} if newest is not None else set()  # type: ignore[attr-defined]
    return [
        i
        for i in range(start, end)
        if isinstance(messages[i], ToolMessage)
        and i not in cleared
        and messages[i].tool_call_id not in kept  # type: ignore[attr-defined]
        and not _was_cleared(messages[i])
    ]


def _was_cleared(message: BaseMessage) -> bool:
    return bool(message.response_metadata.get("context_editing", {}).get("cleared"))


class _Sizes:
    """Each message's tokens, counted once: a run's results are long, and the rule is replayed on every call."""

    def __init__(self, messages: Sequence[BaseMessage], count: Count) -> None:
        self.messages = list(messages)
        self.count = count
        self.base = count([])
        self.sizes = [count([m]) - self.base for m in self.messages]
        self.tools = {
            call["id"]: call["name"] for m in self.messages if isinstance(m, AIMessage) for call in m.tool_calls
        }
        self.cleared: dict[int, ToolMessage] = {}

    def total(self, end: int, cleared: Sequence[int]) -> int:
        return self.base + sum(self.sizes[:end]) - sum(self.freed(i) for i in cleared if i < end)

    def freed(self, index: int) -> int:
        placeholder_message = self._cleared(index)
        return max(self.sizes[index] - (self.count([placeholder_message]) - self.base), 0)

    def applied(self, cleared: Sequence[int]) -> Trim:
        messages = list(self.messages)
        for index in cleared:
            messages[index] = self._cleared(index)
        saved = sum(self.freed(i) for i in cleared)
        return Trim(messages, len(cleared), saved, self.base + sum(self.sizes) - saved)

    def _cleared(self, index: int) -> ToolMessage:
        if index not in self.cleared:
            result = self.messages[index]
            assert isinstance(result, ToolMessage)
            metadata = {**result.response_metadata, "context_editing": {"cleared": True, "strategy": STRATEGY}}
            tool = result.name or self.tools.get(result.tool_call_id) or "the tool"
            text = placeholder(tool, self.sizes[index])
            self.cleared[index] = result.model_copy(
                update={"content": text, "artifact": None, "response_metadata": metadata}
            )
        return self.cleared[index]
