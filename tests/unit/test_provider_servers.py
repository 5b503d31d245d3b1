"""The loopback provider servers (`tests.support.provider_servers`) refuse what the providers refuse, with their
bodies: a request over the input limit, a tool exchange out of order; and their scripted model reads pages with the
Python Interpreter. Hand-built bodies over HTTP, and the real clients and the real Python Interpreter tool, in this
process."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_openai import ChatOpenAI
from lfx.components.utilities.python_repl_core import PythonREPLComponent

from tests.support.provider_servers import (
    COUNTER,
    PYTHON_INTERPRETER,
    Providers,
    page_code,
    running_providers,
)

WIRES = ("openai", "anthropic")
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}
QUESTION = "What is the status of my support case PRJ-7?"
SYSTEM = "You are the support agent of a hosting company. Answer briefly and precisely. " * 90
"""Over 1,024 tokens: at a breakpoint, Anthropic's cache writes it, so a request that reached the cache shows."""


@pytest.fixture(scope="module")
def running() -> Iterator[Providers]:
    with running_providers() as providers:
        yield providers


@pytest.fixture
def providers(running: Providers) -> Iterator[Providers]:
    running.input_limit = None
    yield running
    running.input_limit = None


def post(providers: Providers, wire: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{providers.base_url}{PATHS[wire]}", json=body, headers={"x-api-key": "k"}, timeout=10)


def body_of(wire: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    if wire == "openai":
        return {"model": "gpt-4o-mini", "messages": messages}
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "system": system, "messages": messages}


def caches(providers: Providers) -> tuple[list[int], dict[str, float]]:
    """The prompt caches' state: which calls OpenAI's holds (each a list of its own), Anthropic's entries."""
    return [id(call) for call in providers.openai_cache.calls], dict(providers.anthropic_cache.entries)


def client(wire: str, providers: Providers, streaming: bool) -> ChatOpenAI | ChatAnthropic:
    if wire == "openai":
        return ChatOpenAI(model="gpt-4o-mini", api_key="k", base_url=providers.openai_base_url, streaming=streaming)
    url = providers.anthropic_base_url
    return ChatAnthropic(model="claude-sonnet-4-5", api_key="k", base_url=url, streaming=streaming)


@pytest.mark.parametrize("wire", WIRES)
def test_a_request_over_the_input_limit_is_refused_with_the_providers_body_and_one_at_it_is_answered(
    providers: Providers, wire: str
) -> None:
    body = body_of(wire, [{"role": "user", "content": QUESTION}])
    assert post(providers, wire, body).status_code == 200
    tokens = providers.requests[-1].prompt_tokens
    before = caches(providers)

    providers.input_limit = tokens - 1
    refused = post(providers, wire, body)

    assert refused.status_code == 400
    if wire == "openai":
        message = (
            f"This model's maximum context length is {tokens - 1} tokens. However, your messages resulted in "
            f"{tokens} tokens. Please reduce the length of the messages."
        )
        error = {"message": message, "type": "invalid_request_error", "param": "messages"}
        assert refused.json() == {"error": {**error, "code": "context_length_exceeded"}}
    else:
        message = f"prompt is too long: {tokens} tokens > {tokens - 1} maximum"
        assert refused.json() == {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    assert caches(providers) == before
    recorded = providers.requests[-1]
    assert (recorded.wire, recorded.prompt_tokens, recorded.refused, recorded.usage) == (wire, tokens, message, {})
    assert providers.refused_for_length(wire)[-1] is recorded
    assert recorded not in providers.orphans_refused(wire)

    providers.input_limit = tokens
    assert post(providers, wire, body).status_code == 200
    assert providers.requests[-1].refused is None


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize("wire", WIRES)
async def test_the_real_clients_raise_context_overflow_for_a_request_over_the_input_limit(
    providers: Providers, wire: str, streaming: bool
) -> None:
    refused = len(providers.refused_for_length(wire))
    providers.input_limit = 5

    with pytest.raises(ContextOverflowError):
        await client(wire, providers, streaming).ainvoke(QUESTION)

    assert len(providers.refused_for_length(wire)) == refused + 1
    assert providers.requests[-1].prompt_tokens > 5


def openai_calls(*ids: str) -> dict[str, Any]:
    calls = [{"id": i, "type": "function", "function": {"name": "lookup", "arguments": "{}"}} for i in ids]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def openai_result(call: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call, "content": "open"}


def anthropic_uses(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": i, "name": "lookup", "input": {}} for i in ids]}


def anthropic_results(*ids: str, text: str = "") -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": i, "content": "open"} for i in ids]
    return {"role": "user", "content": blocks + ([{"type": "text", "text": text}] if text else [])}


USER = {"role": "user", "content": QUESTION}
TOOL_WITHOUT_CALL = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
)
CALL_WITHOUT_TOOL = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. "
    "The following tool_call_ids did not have response messages: "
)
OPENAI_ORPHANS = {
    "a tool message first": ([USER, openai_result("call_1")], TOOL_WITHOUT_CALL, 1),
    "a tool message after a user message": (
        [USER, openai_calls("call_1"), openai_result("call_1"), USER, openai_result("call_1")],
        TOOL_WITHOUT_CALL,
        4,
    ),
    "a tool message for another call": ([USER, openai_calls("call_1"), openai_result("call_2")], TOOL_WITHOUT_CALL, 2),
    "a call left unanswered": (
        [USER, openai_calls("call_1", "call_2"), openai_result("call_1"), USER],
        CALL_WITHOUT_TOOL + "call_2",
        1,
    ),
    "calls last": ([USER, openai_calls("call_1", "call_2")], CALL_WITHOUT_TOOL + "call_1, call_2", 1),
}
ANTHROPIC_ORPHANS = {
    "a result without its use": (
        [USER, {"role": "assistant", "content": "Let me look."}, anthropic_results("toolu_9")],
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9. Each `tool_result` "
        "block must have a corresponding `tool_use` block in the previous message.",
    ),
    "a result for another use": (
        [USER, anthropic_uses("toolu_1"), anthropic_results("toolu_1", "toolu_2")],
        "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_2. Each `tool_result` "
        "block must have a corresponding `tool_use` block in the previous message.",
    ),
    "a use without its result": (
        [USER, anthropic_uses("toolu_1", "toolu_2"), anthropic_results("toolu_2", text="and?")],
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. Each "
        "`tool_use` block must have a corresponding `tool_result` block in the next message.",
    ),
}


@pytest.mark.parametrize(("messages", "message", "index"), OPENAI_ORPHANS.values(), ids=list(OPENAI_ORPHANS))
def test_openai_refuses_a_tool_message_out_of_order_before_anything_else(
    providers: Providers, messages: list[dict[str, Any]], message: str, index: int
) -> None:
    providers.input_limit = 1
    before = caches(providers)

    refused = post(providers, "openai", body_of("openai", messages))

    assert refused.status_code == 400
    error = {"message": message, "type": "invalid_request_error", "param": f"messages.[{index}].role", "code": None}
    assert refused.json() == {"error": error}
    assert caches(providers) == before
    assert providers.orphans_refused("openai")[-1] is providers.requests[-1]
    assert providers.requests[-1].refused == message


@pytest.mark.parametrize(("messages", "message"), ANTHROPIC_ORPHANS.values(), ids=list(ANTHROPIC_ORPHANS))
def test_anthropic_refuses_a_tool_block_out_of_order_before_anything_else(
    providers: Providers, messages: list[dict[str, Any]], message: str
) -> None:
    providers.input_limit = 1
    before = caches(providers)

    refused = post(providers, "anthropic", body_of("anthropic", messages))

    assert refused.status_code == 400
    assert refused.json() == {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    assert caches(providers) == before
    assert providers.orphans_refused("anthropic")[-1] is providers.requests[-1]
    assert providers.requests[-1].refused == message


@pytest.mark.parametrize(
    ("wire", "messages"),
    [
        (
            "openai",
            [
                {"role": "system", "content": "You are the support agent."},
                USER,
                openai_calls("call_1", "call_2"),
                openai_result("call_2"),
                openai_result("call_1"),
                {"role": "assistant", "content": "It is open."},
                USER,
            ],
        ),
        ("anthropic", [USER, anthropic_uses("toolu_1", "toolu_2"), anthropic_results("toolu_2", "toolu_1")]),
    ],
    ids=WIRES,
)
def test_a_well_formed_tool_exchange_is_answered(
    providers: Providers, wire: str, messages: list[dict[str, Any]]
) -> None:
    answered = post(providers, wire, body_of(wire, messages))

    assert answered.status_code == 200
    assert providers.requests[-1].refused is None


@pytest.fixture(scope="module")
async def interpreter() -> BaseTool:
    tools = await PythonREPLComponent().to_toolkit()
    return next(tool for tool in tools if tool.name == PYTHON_INTERPRETER)


def test_the_python_interpreter_is_the_tool_langflow_makes_of_the_component_in_tool_mode(
    interpreter: BaseTool,
) -> None:
    assert interpreter.name == PYTHON_INTERPRETER == "run_python_repl"
    assert list(interpreter.args) == ["python_code"]


@pytest.mark.parametrize("tokens", [40, 8_000])
async def test_a_page_printed_by_the_real_python_interpreter_measures_the_tokens_asked(
    interpreter: BaseTool, tokens: int
) -> None:
    call = {
        "type": "tool_call",
        "id": "call_1",
        "name": PYTHON_INTERPRETER,
        "args": {"python_code": page_code(30, tokens)},
    }

    result = await interpreter.ainvoke(call)

    assert isinstance(result, ToolMessage)
    assert result.artifact["result"].startswith("page 30: lorem lorem")
    assert COUNTER.text(result.artifact["result"]) == tokens
    assert tokens <= COUNTER.text(str(result.content)) <= tokens + 10


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize("wire", WIRES)
async def test_asked_to_read_n_pages_the_model_calls_the_interpreter_once_a_response_until_it_holds_n_results(
    providers: Providers, interpreter: BaseTool, wire: str, streaming: bool
) -> None:
    """Results already read may be replaced by a placeholder (as a trimmed context does): each still counts."""
    model = client(wire, providers, streaming).bind_tools([interpreter])
    earlier = [{"name": PYTHON_INTERPRETER, "args": {"python_code": page_code(1, 100)}, "id": "call_0"}]
    messages: list[BaseMessage] = [
        HumanMessage("Please read 1 pages of 100 tokens each and sum them up"),
        AIMessage("", tool_calls=earlier),
        ToolMessage("page 1: lorem lorem", tool_call_id="call_0"),
        AIMessage("Reply 1: read 1 pages"),
        HumanMessage("Now READ 3 pages of 40 tokens each and sum them up"),
    ]
    codes = []
    for _ in range(5):
        answer = await model.ainvoke(messages)
        assert isinstance(answer, AIMessage)
        messages = [
            ToolMessage("[a page read earlier]", tool_call_id=m.tool_call_id) if isinstance(m, ToolMessage) else m
            for m in messages
        ]
        messages.append(answer)
        if not answer.tool_calls:
            break
        assert len(answer.tool_calls) == 1
        codes.append(answer.tool_calls[0]["args"]["python_code"])
        result = await interpreter.ainvoke({**answer.tool_calls[0], "type": "tool_call"})
        assert COUNTER.text(result.artifact["result"]) == 40
        messages.append(result)

    assert codes == [page_code(page, 40) for page in (1, 2, 3)]
    assert re.fullmatch(r"Reply \d+: read 3 pages", messages[-1].text)


def test_a_page_asked_without_the_interpreter_bound_is_an_ordinary_reply(providers: Providers) -> None:
    body = body_of("openai", [{"role": "user", "content": "read 3 pages of 40 tokens"}])

    answered = post(providers, "openai", body).json()

    assert re.fullmatch(r"Reply \d+: read 3 pages of 40 tokens", answered["choices"][0]["message"]["content"])
