"""Loopback servers that speak OpenAI's chat-completions wire and Anthropic's messages wire, for the real clients.

`running_providers()` serves both on one port of 127.0.0.2 (Langflow rewrites 127.0.0.1 and localhost in a base URL
inside a container, and its SSRF guard then refuses it; 127.0.0.2 is neither): `/v1/chat/completions` for
`ChatOpenAI` (`OPENAI_BASE_URL` = `.openai_base_url`) and `/v1/messages` for `ChatAnthropic` (`ANTHROPIC_BASE_URL` =
`.anthropic_base_url`), streaming or not (Anthropic's `message_delta` carries the whole usage, as the API's does).
Any API key is taken. Each request is recorded with its body as sent and the usage answered, which follows each
provider's cache rule (`tests.support.prompt_caches`), tokens counted with the engine's counter.

The model is scripted: a fold (the fold prompt's system message, or the fold instruction last) gets a summary JSON,
or, when a user text of the request holds `CUT_OFF_MARKER`, that JSON cut in half and ended as each provider ends an
answer at its length limit (OpenAI's `finish_reason` "length", Anthropic's `stop_reason` "max_tokens"); an agent
call whose newest user message asks to "calculate" something, with a calculator bound and no tool result yet, gets
one calculator call; any other call gets `Reply <n>: <the newest user text's start>`.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from langflow_summarizing_agent.engine.prompt import FOLD_INSTRUCTION, FOLD_SYSTEM_PROMPT
from langflow_summarizing_agent.engine.tokens import DEFAULT_ENCODING, TokenCounter
from tests.support.prompt_caches import (
    AnthropicCache,
    OpenAICache,
    TooManyBreakpoints,
    openai_blocks,
)

HOST = "127.0.0.2"
COUNTER = TokenCounter(DEFAULT_ENCODING)
FOLD_OPENING = FOLD_INSTRUCTION.split("{fold_id}", 1)[0]
FOLD_SYSTEM_START = FOLD_SYSTEM_PROMPT.split("\n", 1)[0]
CALCULATOR = "evaluate_expression"
FOLD_ANSWER = json.dumps({"pinned": {}, "summary": "- the user and the assistant talked about the support case"})
CUT_OFF_MARKER = "[cut the fold off]"
"""In a message of the conversation, it makes every fold that carries it (quoted or on the agent's prefix) answer cut
off at the length limit."""


@dataclass(frozen=True)
class Recorded:
    """One request: which wire (`openai` or `anthropic`), its body as sent, the usage answered."""

    wire: str
    body: dict[str, Any]
    usage: dict[str, Any]

    @property
    def is_fold(self) -> bool:
        texts = _texts(self.body)
        return texts[-1].startswith(FOLD_OPENING) or _system_text(self.body).startswith(FOLD_SYSTEM_START)


@dataclass
class Providers:
    base_url: str
    requests: list[Recorded] = field(default_factory=list)
    openai_cache: OpenAICache = field(default_factory=OpenAICache)
    anthropic_cache: AnthropicCache = field(default_factory=AnthropicCache)

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    def of(self, wire: str) -> list[Recorded]:
        return [r for r in self.requests if r.wire == wire]


def _texts(body: dict[str, Any]) -> list[str]:
    """The text of each user-role text block, in order (OpenAI's user messages, Anthropic's user text blocks)."""
    texts = []
    for message in body.get("messages") or []:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        texts += [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    return texts or [""]


def _system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    if system is None:
        first = (body.get("messages") or [{}])[0]
        system = first.get("content") if first.get("role") in ("system", "developer") else ""
    return system if isinstance(system, str) else "".join(b.get("text", "") for b in system or [])


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {t.get("name") or t.get("function", {}).get("name") for t in body.get("tools") or []}


def _answer(body: dict[str, Any], number: int) -> tuple[str, dict[str, Any] | None, bool]:
    """The scripted answer: a text, or a calculator call's arguments; and whether it stopped at the length limit."""
    recorded = Recorded("", body, {})
    if recorded.is_fold:
        if any(CUT_OFF_MARKER in text for text in _texts(body)):
            return FOLD_ANSWER[: len(FOLD_ANSWER) // 2], None, True
        return FOLD_ANSWER, None, False
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content")
    answered = last.get("role") == "tool" or (
        isinstance(content, list) and any(b.get("type") == "tool_result" for b in content if isinstance(b, dict))
    )
    newest = _texts(body)[-1]
    if "calculate" in newest and CALCULATOR in _tool_names(body) and not answered:
        return "", {"expression": "6 * 7"}, False
    return f"Reply {number}: {newest[:40]}", None, False


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> StreamingResponse:
    async def stream() -> AsyncIterator[bytes]:
        for name, data in events:
            line = data if isinstance(data, str) else json.dumps(data)
            yield ((f"event: {name}\n" if name else "") + f"data: {line}\n\n").encode()

    return StreamingResponse(stream(), media_type="text/event-stream")


def openai_app(providers: Providers) -> Route:
    async def completions(request: Request) -> Response:
        body = await request.json()
        number = len(providers.requests) + 1
        blocks = openai_blocks(body, COUNTER.text)
        prompt = sum(tokens for _, tokens in blocks)
        cached = providers.openai_cache.call(blocks)
        text, arguments, cut_off = _answer(body, number)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": 5,
            "total_tokens": prompt + 5,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        providers.requests.append(Recorded("openai", body, usage))
        call = {"id": f"call_{number}", "type": "function"}
        calls = [{**call, "function": {"name": CALCULATOR, "arguments": json.dumps(arguments)}}] if arguments else None
        finish = "tool_calls" if calls else "length" if cut_off else "stop"
        head = {"id": f"chatcmpl-{number}", "created": int(time.time()), "model": body.get("model", "")}
        if not body.get("stream"):
            message = {"role": "assistant", "content": text or None, **({"tool_calls": calls} if calls else {})}
            choice = {"index": 0, "message": message, "finish_reason": finish}
            return JSONResponse({**head, "object": "chat.completion", "choices": [choice], "usage": usage})
        chunk = {**head, "object": "chat.completion.chunk"}
        delta: dict[str, Any] = {"tool_calls": [{"index": 0, **calls[0]}]} if calls else {"content": text}
        events: list[tuple[str | None, dict[str, Any] | str]] = [
            (None, {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
            (None, {**chunk, "choices": [{"index": 0, "delta": delta}]}),
            (None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
        ]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append((None, {**chunk, "choices": [], "usage": usage}))
        return _sse([*events, (None, "[DONE]")])

    return Route("/v1/chat/completions", completions, methods=["POST"])


def anthropic_app(providers: Providers) -> Route:
    async def messages(request: Request) -> Response:
        body = await request.json()
        number = len(providers.requests) + 1
        try:
            cached = providers.anthropic_cache.request(body, COUNTER.text)
        except TooManyBreakpoints as refused:
            error = {"type": "invalid_request_error", "message": str(refused)}
            return JSONResponse({"type": "error", "error": error}, status_code=400)
        usage = {
            "input_tokens": cached.input_tokens,
            "output_tokens": 5,
            "cache_creation_input_tokens": cached.cache_creation_input_tokens,
            "cache_read_input_tokens": cached.cache_read_input_tokens,
        }
        providers.requests.append(Recorded("anthropic", body, usage))
        text, arguments, cut_off = _answer(body, number)
        use = {"type": "tool_use", "id": f"toolu_{number}", "name": CALCULATOR, "input": arguments}
        block = use if arguments else {"type": "text", "text": text}
        stop = "tool_use" if arguments else "max_tokens" if cut_off else "end_turn"
        message = {"id": f"msg_{number}", "type": "message", "role": "assistant", "model": body.get("model", "")}
        if not body.get("stream"):
            ending = {"stop_reason": stop, "stop_sequence": None}
            return JSONResponse({**message, "content": [block], **ending, "usage": usage})
        start = {**block, "input": {}} if arguments else {"type": "text", "text": ""}
        partial = {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
        delta = partial if arguments else {"type": "text_delta", "text": text}
        started = {**message, "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
        return _sse(
            [
                ("message_start", {"type": "message_start", "message": started}),
                ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": usage},
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        )

    return Route("/v1/messages", messages, methods=["POST"])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_providers() -> Iterator[Providers]:
    """Both wires on a free port of 127.0.0.2, served by uvicorn in a thread of this process until the block ends."""
    port = _free_port()
    providers = Providers(f"http://{HOST}:{port}")
    app = Starlette(routes=[openai_app(providers), anthropic_app(providers)])
    server = uvicorn.Server(uvicorn.Config(app, host=HOST, port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, name="loopback-providers", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            msg = f"the loopback provider server did not start on {HOST}:{port}"
            raise RuntimeError(msg)
        time.sleep(0.02)
    try:
        yield providers
    finally:
        server.should_exit = True
        thread.join(timeout=10)
