"""The run's tool results within the model's input limit (`engine.tool_results`): each call of a long run stays under
the trim threshold, no tool call loses its result, the newest results, the user's message and the history stay, and a
call clears only what the calls before it cleared until it must clear more."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langflow_summarizing_agent.engine.tokens import TokenCounter
from langflow_summarizing_agent.engine.tool_results import (
    TRIM_AT,
    TRIM_TO,
    clear_all_but_newest,
    placeholder,
    trim_tool_results,
)

COUNTER = TokenCounter("o200k_base")
SYSTEM = SystemMessage(content="You are a support agent. " * 20)


def count(messages: Sequence[BaseMessage]) -> int:
    return COUNTER.prompt([SYSTEM, *messages])


def run(results: Sequence[int], history: int = 4) -> list[BaseMessage]:
    """A history of `history` messages, the user's message, then one tool call and its result of each size (in
    words), one call per model answer."""
    messages: list[BaseMessage] = []
    for i in range(history):
        messages.append(HumanMessage(content=f"question {i}") if i % 2 == 0 else AIMessage(content=f"answer {i}"))
    messages.append(HumanMessage(content="read the pages"))
    for i, size in enumerate(results):
        call = {"name": "run_python_repl", "args": {"python_code": f"print(page {i})"}, "id": f"call_{i}"}
        messages.append(AIMessage(content="", tool_calls=[call]))
        messages.append(ToolMessage(content=f"page {i}: " + "lorem " * size, tool_call_id=f"call_{i}"))
    return messages


def calls_of(messages: list[BaseMessage]) -> list[list[BaseMessage]]:
    """What each model call of the run was sent: the messages before each answer, and the whole list last."""
    start = next(i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], HumanMessage)) + 1
    return [messages[:i] for i in range(start, len(messages)) if isinstance(messages[i], AIMessage)] + [messages]


def test_a_long_run_clears_its_oldest_results_and_keeps_every_call_its_history_and_the_newest_result() -> None:
    messages = run([8_000] * 30)

    trim = trim_tool_results(messages, count, 32_000)

    # The last trim left the newest result under the lower mark, and the one after it fits under the threshold.
    assert trim.tokens <= 32_000 * TRIM_AT
    assert trim.cleared == 28
    assert trim.messages[:5] == messages[:5]
    assert trim.messages[-1] == messages[-1]
    assert [m.tool_calls for m in trim.messages if isinstance(m, AIMessage)] == [
        m.tool_calls for m in messages if isinstance(m, AIMessage)
    ]
    first = trim.messages[6]
    assert isinstance(first, ToolMessage) and first.content == placeholder(
        "run_python_repl", count([messages[6]]) - count([])
    )
    assert first.tool_call_id == "call_0"
    assert first.response_metadata["context_editing"]["cleared"] is True


def test_a_run_under_the_threshold_is_sent_as_it_is() -> None:
    messages = run([2_000] * 5)

    trim = trim_tool_results(messages, count, 32_000)

    assert trim.messages == messages
    assert trim.cleared == trim.saved_tokens == 0


def test_a_trim_clears_down_to_the_lower_mark_so_the_next_calls_keep_the_same_start() -> None:
    """With 3,000-token results and a 32,000-token limit, a trim frees room for several results: the calls between
    two trims send the same cleared results, so the provider's cache reads the start of each."""
    messages = run([3_000] * 20)
    cleared_by_call = [
        frozenset(i for i, m in enumerate(trim_tool_results(call, count, 32_000).messages) if m != call[i])
        for call in calls_of(messages)
    ]

    changes = sum(1 for before, after in itertools.pairwise(cleared_by_call) if before != after)

    assert changes <= len(cleared_by_call) // 3, cleared_by_call
    assert all(before <= after for before, after in itertools.pairwise(cleared_by_call))


def test_a_refused_call_is_retried_with_every_result_but_the_newest_cleared() -> None:
    messages = run([1_000] * 6)

    trim = clear_all_but_newest(messages, count)

    results = [m for m in trim.messages if isinstance(m, ToolMessage)]
    assert [
        r.content == placeholder("run_python_repl", count([messages[6 + 2 * i]]) - count([]))
        for i, r in enumerate(results)
    ] == [True] * 5 + [False]
    assert trim.cleared == 5


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=6_000), min_size=1, max_size=25),
    limit=st.sampled_from([8_000, 16_000, 32_000, 128_000]),
    history=st.integers(min_value=0, max_value=6),
)
def test_every_call_keeps_each_tool_call_with_its_result_and_goes_over_the_threshold_only_when_nothing_is_left_to_clear(
    sizes: list[int], limit: int, history: int
) -> None:
    messages = run(sizes, history)
    previous: frozenset[int] = frozenset()
    for call in calls_of(messages):
        trim = trim_tool_results(call, count, limit)
        answered = {m.tool_call_id for m in trim.messages if isinstance(m, ToolMessage)}
        asked = {c["id"] for m in trim.messages if isinstance(m, AIMessage) for c in m.tool_calls}
        assert answered == asked
        assert [type(m) for m in trim.messages] == [type(m) for m in call]
        cleared = frozenset(i for i, m in enumerate(trim.messages) if m != call[i])
        assert all(isinstance(call[i], ToolMessage) for i in cleared)
        assert previous <= cleared, "a call cleared less than the call before it"
        newest = max((i for i, m in enumerate(call) if isinstance(m, ToolMessage)), default=None)
        assert newest not in cleared
        unclearable = len([m for m in call if isinstance(m, ToolMessage)]) - len(cleared) <= 1
        assert trim.tokens <= limit * TRIM_AT or unclearable
        if cleared - previous:
            assert trim.tokens <= limit * TRIM_TO or unclearable
        previous = cleared
