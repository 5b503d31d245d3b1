"""A long turn on the real server: one agent run whose tool results together are far over the model's input limit.

The ready flow as exported with Langflow's Python Interpreter in Tool Mode on the agent's Tools (`tests.support
.tool_flows`), OpenAI's or Anthropic's model picked in the model picker (`ChatOpenAI`, `ChatAnthropic`), sending to the
loopback provider servers, which refuse a request over `Providers.input_limit` as each provider does. The scripted
model answers "read N pages of T tokens" with one interpreter call per answer, each printing a page of T tokens, until
N results follow the question; then `Reply <n>: read N pages`.

With Summarize Older Messages on, the run's oldest tool results are cleared from what the model is sent once a call
passes 75% of the model's input limit; a call still refused for its length is retried once with less. What Langflow
stores of the reply keeps every tool call with its whole output.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import pytest

from langflow_summarizing_agent.wiring.agent_turn import MEMORY_STEP_NAME
from tests.server.test_provider_clients import PICKED
from tests.support.flow_files import agent_template, load_support_flow
from tests.support.provider_servers import PYTHON_INTERPRETER, Providers, Recorded
from tests.support.server_chat import ServerChat, reply_text
from tests.support.server_fixtures import LangflowServer
from tests.support.tool_flows import with_python_interpreter

WIRES = ("openai", "anthropic")
# What these tests check is the agent run and the provider's requests; the stored reply's content blocks are checked on
# PostgreSQL by the memory step's tests.
pytestmark = pytest.mark.one_database
LIMIT = 32000
PAGES = 30
PAGE_TOKENS = 8000
MAX_ITERATIONS = 40
"""A model call per page and one for the answer; the node's default of 15 would end the run first."""
PLACEHOLDER_START = f"[{PYTHON_INTERPRETER} result cleared: "
CLEARED_NOTE = (
    f"earlier tool results cleared to stay within the model's input limit of {LIMIT} tokens (Model Input Limit)"
)
RETRIED_NOTE = "a call refused for its length was retried with less"
UNFIT_REPLY_START = "I could not answer: this turn does not fit the model's input limit"


def read(pages: int, tokens: int = PAGE_TOKENS) -> str:
    return f"Please read {pages} pages of {tokens} tokens each and tell me how many you read."


@dataclass(frozen=True)
class Turn:
    """One turn through the run API: the server's answer, the provider requests it made, the session's stored
    messages."""

    status_code: int
    answer: dict[str, Any]
    requests: list[Recorded]
    stored: list[dict[str, Any]]

    @property
    def reply(self) -> str:
        return reply_text(self.answer)

    @property
    def answered(self) -> list[Recorded]:
        return [r for r in self.requests if r.refused is None]

    @property
    def refused_for_length(self) -> list[Recorded]:
        return [r for r in self.requests if r.refused_for_length]

    @property
    def orphans_refused(self) -> list[Recorded]:
        return [r for r in self.requests if r.refused is not None and not r.refused_for_length]

    def stored_blocks(self) -> list[dict[str, Any]]:
        """The stored reply's content blocks, grouped under "Agent Steps" or flat, as the Playground gets them."""
        [reply] = [m for m in self.stored if m["sender"] != "User"]
        return [item for block in reply.get("content_blocks") or [] for item in block.get("contents") or [block]]

    def memory_step(self) -> str:
        """The memory step's text with its lines joined (the step wraps its items at `report.MAX_STEP_LINE`)."""
        [step] = [b["output"] for b in self.stored_blocks() if b.get("name") == MEMORY_STEP_NAME]
        return " ".join(str(step).split())


def tool_flow(server: LangflowServer, wire: str, **agent_values: Any) -> ServerChat:
    """The ready flow with the Python Interpreter on its agent and `wire`'s model picked, `agent_values` set."""
    with server.client(token=server.superuser_token) as client:
        flow = with_python_interpreter(load_support_flow(), client)
    template = agent_template(flow)
    values = {"model": [PICKED[wire]], "api_key": "any-key", "max_iterations": MAX_ITERATIONS, **agent_values}
    missing = [name for name in values if name not in template]
    assert not missing, f"the ready flow's agent has no {missing}: re-export it (scripts/export_support_flow.py)"
    for name, value in values.items():
        template[name]["value"] = value
    template["api_key"]["load_from_db"] = False  # a key typed into the field, not a global variable's name
    return ServerChat.create(server, server.superuser_token, server.superuser_api_key, data=flow["data"])


def one_turn(chat: ServerChat, providers: Providers, text: str, input_limit: int) -> Turn:
    """`text` in a new session while the provider takes at most `input_limit` prompt tokens a request."""
    session_id, start = f"long-turn-{uuid.uuid4().hex[:8]}", len(providers.requests)
    providers.input_limit = input_limit
    try:
        response = chat.run(session_id, text)
    finally:
        providers.input_limit = None
    chat.state(session_id)  # waits for the work after the reply
    return Turn(response.status_code, response.json(), providers.requests[start:], chat.messages(session_id))


def tool_exchange(recorded: Recorded) -> tuple[list[str], list[str]]:
    """The ids of the tool calls a request sends, and the text of each tool result, in order."""
    calls: list[str] = []
    results: list[str] = []
    for message in recorded.body["messages"]:
        calls += [call["id"] for call in message.get("tool_calls") or []]
        if message.get("role") == "tool":
            results.append(message["content"])
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use":
                calls.append(block["id"])
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                results.append(inner if isinstance(inner, str) else "".join(b.get("text", "") for b in inner or []))
    return calls, results


@pytest.fixture(scope="module", params=WIRES)
def long_turn(
    request: pytest.FixtureRequest, langflow_server: LangflowServer, loopback_providers: Providers
) -> Iterator[tuple[str, Turn]]:
    """30 pages of 8000 tokens in one turn, Model Input Limit 32000 on the node and at the provider."""
    wire = request.param
    chat = tool_flow(langflow_server, wire, summarize_older_messages=True, model_input_limit=LIMIT)
    yield wire, one_turn(chat, loopback_providers, read(PAGES), LIMIT)


def test_a_turn_of_thirty_long_tool_results_is_answered_with_every_call_within_the_limit(
    long_turn: tuple[str, Turn],
) -> None:
    _, turn = long_turn

    assert turn.status_code == 200, turn.answer
    assert turn.reply.endswith(f"read {PAGES} pages"), turn.reply
    assert (turn.refused_for_length, turn.orphans_refused) == ([], [])
    assert len(turn.answered) == PAGES + 1
    assert max(r.prompt_tokens for r in turn.answered) <= LIMIT
    calls, results = tool_exchange(turn.answered[-1])
    assert len(calls) == len(results) == PAGES
    cleared = [text for text in results if text.startswith(PLACEHOLDER_START)]
    assert cleared and results[-1] not in cleared
    assert f"page {PAGES}: " in results[-1]


def test_the_stored_reply_keeps_every_tool_call_with_its_whole_output(long_turn: tuple[str, Turn]) -> None:
    _, turn = long_turn

    calls = [b for b in turn.stored_blocks() if b.get("type") == "tool_use" and b.get("name") == PYTHON_INTERPRETER]
    assert len(calls) == PAGES, [b.get("name") for b in turn.stored_blocks()]
    for page, call in enumerate(calls, start=1):
        output = json.dumps(call["output"])
        assert f"page {page}: " in output
        assert output.count("lorem") >= PAGE_TOKENS - 10


def test_the_memory_step_says_the_earlier_tool_results_were_cleared(long_turn: tuple[str, Turn]) -> None:
    _, turn = long_turn

    assert CLEARED_NOTE in turn.memory_step()


@pytest.mark.parametrize("wire", ["openai"])
def test_the_stock_agent_fails_the_same_turn_refused_for_length(
    langflow_server: LangflowServer, loopback_providers: Providers, wire: str
) -> None:
    """With Summarize Older Messages off the agent sends every result on every call: the fifth call (four pages, about
    32800 tokens) is over the provider's limit and refused for its length, the run API answers HTTP 500 with the
    provider's refusal, and the session stores an error message in place of the reply."""
    chat = tool_flow(langflow_server, wire, summarize_older_messages=False, model_input_limit=LIMIT)

    turn = one_turn(chat, loopback_providers, read(PAGES), LIMIT)

    assert turn.status_code == HTTPStatus.INTERNAL_SERVER_ERROR, turn.answer
    [refused] = turn.refused_for_length
    assert refused.prompt_tokens > LIMIT
    assert refused.refused in turn.answer["detail"]
    assert (len(turn.answered), turn.orphans_refused) == (4, [])
    [error] = [m for m in turn.stored if m["sender"] != "User"]
    assert error["category"] == "error"
    assert refused.refused in error["text"]


@pytest.mark.parametrize("wire", WIRES)
def test_a_call_refused_for_length_is_retried_once_and_later_calls_keep_to_the_limit_it_names(
    langflow_server: LangflowServer, loopback_providers: Providers, wire: str
) -> None:
    """Model Input Limit 0 takes the model's profile (128000 tokens for gpt-4o-mini, 200000 for claude-sonnet-4-5),
    while the provider takes 32000: the first call over that is refused, retried with the earlier results cleared,
    and the run's later calls are cleared to the limit the refusal named."""
    pages = 10
    chat = tool_flow(langflow_server, wire, summarize_older_messages=True, model_input_limit=0)

    turn = one_turn(chat, loopback_providers, read(pages), LIMIT)

    assert turn.status_code == 200, turn.answer
    assert turn.reply.endswith(f"read {pages} pages"), turn.reply
    assert len(turn.refused_for_length) == 1
    assert turn.orphans_refused == []
    assert max(r.prompt_tokens for r in turn.answered) <= LIMIT
    assert RETRIED_NOTE in turn.memory_step()


@pytest.mark.parametrize("wire", WIRES)
def test_a_turn_that_cannot_fit_even_retried_ends_with_a_reply_that_says_so(
    langflow_server: LangflowServer, loopback_providers: Providers, wire: str
) -> None:
    """One page is over the provider's limit on its own: the retry cannot clear it, and the run answers in words."""
    chat = tool_flow(langflow_server, wire, summarize_older_messages=True)

    turn = one_turn(chat, loopback_providers, read(3), input_limit=3000)

    assert turn.status_code == 200, turn.answer
    assert turn.reply.startswith(UNFIT_REPLY_START), turn.reply
    assert len(turn.refused_for_length) == 2
    assert turn.orphans_refused == []
    [reply] = [m for m in turn.stored if m["sender"] != "User"]
    assert (reply["category"], reply["properties"]["state"]) == ("message", "complete")
    assert reply["text"].startswith(UNFIT_REPLY_START)
