"""The support session on the wire: the loopback provider servers answering as the script does, and their recorded
requests read back into the benchmark's calls (`benchmarks.model.ModelCall`).

`ScriptedAnswers(session).serving()` makes the loopback servers (`tests.support.provider_servers`) answer as the
replay's model does: an agent call with the exchange's calculator calls, then its scripted reply; a fold with the
scripted summary (`benchmarks.model.scripted_summary`), or that answer cut off at the length limit. An exchange is
known by its user text (the script's texts are unique). Other requests get the servers' own answers.

`wire_calls` reads each request body as LangChain messages (`wire_messages`) for the fidelity rules, and its usage as
the provider answered it for the bill: OpenAI's `cached_tokens` are read; Anthropic's cache writes and reads are its
`cache_creation_input_tokens` and `cache_read_input_tokens`. A fold is one as `Recorded.is_fold` says; it reads the
agent's prefix when its messages start with the previous agent call's, byte for byte, and its usage reads at least
what the provider caches of that call.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from unittest import mock

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from benchmarks.fidelity import message_numbers
from benchmarks.model import ModelCall, agent_parts, fold_parts, holds_first_facts, scripted_summary
from benchmarks.script import Exchange
from tests.support import provider_servers
from tests.support.fake_chat_model import parse_fold_prompt
from tests.support.prompt_caches import anthropic_blocks, openai_blocks, openai_cacheable
from tests.support.provider_servers import CALCULATOR, COUNTER, Answer, Recorded


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def wire_messages(body: dict[str, Any]) -> list[BaseMessage]:
    """A chat-completions or Messages API request body as LangChain messages: one message per text block (Anthropic's
    client merges a user message into the one before it), tool results as tool messages."""
    messages: list[BaseMessage] = []
    if body.get("system"):
        messages.append(SystemMessage("".join(b.get("text", "") for b in _text_blocks(body["system"]))))
    for message in body.get("messages") or []:
        role, content = message.get("role"), message.get("content")
        if role in ("system", "developer"):
            messages.append(SystemMessage("".join(b.get("text", "") for b in _text_blocks(content))))
        elif role == "tool":
            messages.append(ToolMessage(str(content), tool_call_id=str(message.get("tool_call_id"))))
        elif role == "user":
            for block in _text_blocks(content):
                if block.get("type") == "tool_result":
                    messages.append(ToolMessage(str(block.get("content")), tool_call_id=str(block.get("tool_use_id"))))
                elif block.get("type") == "text":
                    messages.append(HumanMessage(block["text"]))
        else:
            messages += _assistant(message)
    return messages


def _assistant(message: dict[str, Any]) -> list[AIMessage]:
    texts = [b["text"] for b in _text_blocks(message.get("content")) if b.get("type") == "text"]
    calls = [
        {"name": c["function"]["name"], "args": json.loads(c["function"]["arguments"] or "{}"), "id": c["id"]}
        for c in message.get("tool_calls") or []
    ]
    calls += [
        {"name": b["name"], "args": b.get("input") or {}, "id": b["id"]}
        for b in _text_blocks(message.get("content"))
        if b.get("type") == "tool_use"
    ]
    replies = [AIMessage(text) for text in texts] or [AIMessage("")]
    replies[-1] = AIMessage(replies[-1].content, tool_calls=calls)
    return replies


class ScriptedAnswers:
    """The loopback provider servers' answers, as the script's (`serving()`): an agent call of an exchange gets its
    calculator calls, then its reply; a fold its scripted summary, cut off at the length limit (as each provider cuts
    an answer off) at the 1st fold and every `cut_off_every`-th after it (0: never; `folds` counts them). `cut_off`
    holds the numbers of the requests answered cut off (`providers.requests[number - 1]`)."""

    def __init__(self, session: Sequence[Exchange]) -> None:
        self.exchanges = {e.user_text: e for e in session if not e.compact}
        self.served = provider_servers._answer
        self.cut_off_every = 0
        self.folds = 0
        self.cut_off: set[int] = set()

    def __call__(self, body: dict[str, Any], number: int) -> Answer:
        messages = wire_messages(body)
        if Recorded("", body, {}, 0).is_fold:
            fold = parse_fold_prompt(messages)
            answer = scripted_summary(fold.summary, fold.conversation)
            self.folds += 1
            if self.cut_off_every and self.folds % self.cut_off_every == 1 % self.cut_off_every:
                self.cut_off.add(number)
                return Answer(answer[: len(answer) // 2], cut_off=True)
            return Answer(answer)
        last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
        exchange = self.exchanges.get(str(messages[last_human].content)) if last_human >= 0 else None
        if exchange is None:
            return self.served(body, number)
        done = sum(isinstance(m, ToolMessage) for m in messages[last_human:])
        if done < exchange.tool_calls:
            return Answer(call=(CALCULATOR, {"expression": exchange.expression}))
        return Answer(exchange.reply)

    @contextmanager
    def serving(self) -> Iterator[ScriptedAnswers]:
        """While the block runs, the loopback provider servers of this process answer as this object says."""
        with mock.patch.object(provider_servers, "_answer", self):
            yield self


def usage_parts(recorded: Recorded) -> tuple[int, int, int]:
    """A request's input, read and written tokens as its provider answered them."""
    usage = recorded.usage
    if recorded.wire == "openai":
        return usage["prompt_tokens"], (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0), 0
    read, written = usage.get("cache_read_input_tokens", 0), usage.get("cache_creation_input_tokens", 0)
    return usage["input_tokens"] + read + written, read, written


def cacheable(recorded: Recorded) -> int:
    """What the provider caches of a request's whole prompt: OpenAI from 1,024 tokens in steps, Anthropic all of it."""
    if recorded.wire == "openai":
        return openai_cacheable(sum(tokens for _, tokens in openai_blocks(recorded.body, COUNTER.text)))
    return sum(tokens for _, tokens in anthropic_blocks(recorded.body, COUNTER.text)[0])


def reads_prefix(fold: Recorded, agent: Recorded | None) -> bool:
    """The fold starts with the agent call's messages (and its tools and system prompt), byte for byte, and read at
    least what the provider cached of that call."""
    if agent is None or agent.wire != fold.wire:
        return False
    same = all(json.dumps(fold.body.get(k)) == json.dumps(agent.body.get(k)) for k in ("tools", "system"))
    sent = agent.body["messages"]
    prefix = json.dumps(fold.body["messages"][: len(sent)]) == json.dumps(sent)
    return same and prefix and 0 < cacheable(agent) <= usage_parts(fold)[1]


def wire_calls(
    session: Sequence[Exchange], requests: Sequence[tuple[int, Recorded]], cut_off: Collection[int] = ()
) -> list[ModelCall]:
    """The run's requests, each with the exchange it came in, as the benchmark's calls; those at the positions
    `cut_off` were answered cut off, failed folds."""
    numbers, calls, agent = message_numbers(session), [], None
    for position, (exchange, recorded) in enumerate(requests):
        messages = wire_messages(recorded.body)
        real, read, written = usage_parts(recorded)
        record: dict[str, Any] = {"exchange": exchange, "input_tokens": real, "cached_tokens": read}
        record |= {"written_tokens": written, "first_facts": holds_first_facts(messages)}
        if recorded.is_fold:
            parts = fold_parts(messages, numbers) | {"failed": position in cut_off}
            calls.append(ModelCall(**record, **parts, kind="summary", prefix_read=reads_prefix(recorded, agent)))
        else:
            calls.append(ModelCall(**record, **agent_parts(messages, numbers), kind="agent"))
            agent = recorded
    return calls


def fold_summary(recorded: Recorded) -> str:
    """The summary text of the scripted answer to a fold request, whole."""
    fold = parse_fold_prompt(wire_messages(recorded.body))
    return str(json.loads(scripted_summary(fold.summary, fold.conversation))["summary"])
