"""Loopback servers that speak OpenAI's chat-completions wire and Anthropic's messages wire, for the real clients.

`running_providers()` serves both on one port of 127.0.0.2 (Langflow rewrites 127.0.0.1 and localhost in a base URL
inside a container, and its SSRF guard then refuses it; 127.0.0.2 is neither): `/v1/chat/completions` for
`ChatOpenAI` (`OPENAI_BASE_URL` = `.openai_base_url`) and `/v1/messages` for `ChatAnthropic` (`ANTHROPIC_BASE_URL` =
`.anthropic_base_url`), streaming or not (Anthropic's `message_delta` carries the whole usage, as the API's does).
Any API key is taken. Each request is recorded with its body as sent, its prompt tokens and the usage answered, which
follows each provider's cache rule (`tests.support.prompt_caches`), tokens counted with the engine's counter.

A request is refused as the provider refuses it, with its HTTP 400 body (`invalid_request_error`), recorded with the
refusal's message, and leaves the prompt caches as they were:
- first, a tool exchange out of order: OpenAI's `tool` message that answers no `tool_calls` of the assistant message
  right before its run of tool messages, or `tool_calls` whose ids that run does not all answer; Anthropic's
  `tool_result` block whose `tool_use_id` is not a `tool_use` of the previous message, or a `tool_use` whose id the
  next message holds no `tool_result` for (`Providers.orphans_refused`);
- then, while a test sets `Providers.input_limit`, a request of more prompt tokens, with `context_length_exceeded` /
  "prompt is too long", which LangChain's clients raise as `ContextOverflowError` (`Providers.refused_for_length`).

The model is scripted: a fold (the fold prompt's system message, or the fold instruction last) gets a summary JSON,
or, when a user text of the request holds `CUT_OFF_MARKER`, that JSON cut in half and ended as each provider ends an
answer at its length limit (OpenAI's `finish_reason` "length", Anthropic's `stop_reason` "max_tokens"). An agent
call whose newest user text asks to "read <N> pages of <T> tokens", with the Python Interpreter bound
(`PYTHON_INTERPRETER`), gets one interpreter call printing a page of T tokens (`page_code`) per response, until the
request holds N tool results after that text (whatever they now say), then `Reply <n>: read <N> pages`. An agent
call whose newest user text asks to "calculate" something, with a calculator bound and no tool result yet, gets one
calculator call. Any other call gets `Reply <n>: <the newest user text's start>`.
"""

from __future__ import annotations

import json
import re
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
    anthropic_blocks,
    openai_blocks,
)

HOST = "127.0.0.2"
COUNTER = TokenCounter(DEFAULT_ENCODING)
FOLD_OPENING = FOLD_INSTRUCTION.split("{fold_id}", 1)[0]
FOLD_SYSTEM_START = FOLD_SYSTEM_PROMPT.split("\n", 1)[0]
CALCULATOR = "evaluate_expression"
PYTHON_INTERPRETER = "run_python_repl"
"""The tool Langflow makes of its Python Interpreter (`PythonREPLComponent`) in tool mode, named after the output's
method; it takes the code as `python_code`."""
READ_PAGES = re.compile(r"read (\d+) pages of (\d+) tokens", re.IGNORECASE)
FOLD_ANSWER = json.dumps({"pinned": {}, "summary": "- the user and the assistant talked about the support case"})
CUT_OFF_MARKER = "[cut the fold off]"
"""In a message of the conversation, it makes every fold that carries it (quoted or on the agent's prefix) answer cut
off at the length limit."""
OPENAI_TOO_LONG = (
    "This model's maximum context length is {limit} tokens. However, your messages resulted in {tokens} tokens. "
    "Please reduce the length of the messages."
)
ANTHROPIC_TOO_LONG = "prompt is too long: {tokens} tokens > {limit} maximum"
OPENAI_TOOL_WITHOUT_CALL = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
)
OPENAI_CALL_WITHOUT_TOOL = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. "
    "The following tool_call_ids did not have response messages: {ids}"
)
ANTHROPIC_RESULT_WITHOUT_USE = (
    "messages.{index}.content.{block}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. "
    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
)
ANTHROPIC_USE_WITHOUT_RESULT = (
    "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: {ids}. "
    "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
)
LENGTH_REFUSALS = (OPENAI_TOO_LONG.split("{", 1)[0], ANTHROPIC_TOO_LONG.split(":", 1)[0])
"""How each provider's refusal for length opens, as LangChain's clients look for it."""


@dataclass(frozen=True)
class Recorded:
    """One request: which wire (`openai` or `anthropic`), its body as sent, the usage answered (none when refused),
    its prompt tokens, and the message of the provider's refusal, if it refused it."""

    wire: str
    body: dict[str, Any]
    usage: dict[str, Any]
    prompt_tokens: int
    refused: str | None = None

    @property
    def is_fold(self) -> bool:
        return _is_fold(self.body)

    @property
    def refused_for_length(self) -> bool:
        return self.refused is not None and self.refused.startswith(LENGTH_REFUSALS)


@dataclass
class Providers:
    base_url: str
    requests: list[Recorded] = field(default_factory=list)
    openai_cache: OpenAICache = field(default_factory=OpenAICache)
    anthropic_cache: AnthropicCache = field(default_factory=AnthropicCache)
    input_limit: int | None = None
    """The most prompt tokens a request may hold; a test that sets it sets it back to None."""

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url

    def of(self, wire: str) -> list[Recorded]:
        """The requests of `wire`, answered or refused."""
        return [r for r in self.requests if r.wire == wire]

    def refused_for_length(self, wire: str) -> list[Recorded]:
        return [r for r in self.of(wire) if r.refused_for_length]

    def orphans_refused(self, wire: str) -> list[Recorded]:
        """The requests of `wire` refused for a tool exchange out of order."""
        return [r for r in self.of(wire) if r.refused is not None and not r.refused_for_length]


@dataclass(frozen=True)
class Answer:
    """The scripted answer: a text or one tool call (its name and arguments), and whether it stopped at the length
    limit."""

    text: str = ""
    call: tuple[str, dict[str, Any]] | None = None
    cut_off: bool = False


def _blocks(content: object) -> list[dict[str, Any]]:
    """A message's content as blocks: a string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _texts(body: dict[str, Any]) -> list[str]:
    """The text of each user-role text block, in order (OpenAI's user messages, Anthropic's user text blocks)."""
    texts = []
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            texts += [b.get("text", "") for b in _blocks(message.get("content")) if b.get("type") == "text"]
    return texts or [""]


def _system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    if system is None:
        first = (body.get("messages") or [{}])[0]
        system = first.get("content") if first.get("role") in ("system", "developer") else ""
    return system if isinstance(system, str) else "".join(b.get("text", "") for b in system or [])


def _is_fold(body: dict[str, Any]) -> bool:
    return _texts(body)[-1].startswith(FOLD_OPENING) or _system_text(body).startswith(FOLD_SYSTEM_START)


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {t.get("name") or t.get("function", {}).get("name") for t in body.get("tools") or []}


def _results_since_newest_text(body: dict[str, Any]) -> int:
    """Tool results after the newest user text: OpenAI's tool messages, Anthropic's `tool_result` blocks."""
    results = 0
    for message in body.get("messages") or []:
        blocks = _blocks(message.get("content"))
        results += 1 if message.get("role") == "tool" else sum(b.get("type") == "tool_result" for b in blocks)
        if message.get("role") == "user" and any(b.get("type") == "text" for b in blocks):
            results = 0
    return results


def page_code(page: int, tokens: int) -> str:
    """Python Interpreter code that prints page `page`, `tokens` tokens long as `COUNTER` counts the printed text."""
    header = f"page {page}:"
    return f'print("{header} " + "lorem " * {max(tokens - COUNTER.text(header), 0)})'


def _answer(body: dict[str, Any], number: int) -> Answer:
    """The scripted model's answer to a request, the `number`th the servers got (see the module's docstring)."""
    if _is_fold(body):
        if any(CUT_OFF_MARKER in text for text in _texts(body)):
            return Answer(FOLD_ANSWER[: len(FOLD_ANSWER) // 2], cut_off=True)
        return Answer(FOLD_ANSWER)
    last = (body.get("messages") or [{}])[-1]
    answered = last.get("role") == "tool" or any(b.get("type") == "tool_result" for b in _blocks(last.get("content")))
    newest, tools = _texts(body)[-1], _tool_names(body)
    pages = READ_PAGES.search(newest)
    if pages and PYTHON_INTERPRETER in tools:
        return _read_pages(int(pages[1]), int(pages[2]), _results_since_newest_text(body), number)
    if "calculate" in newest and CALCULATOR in tools and not answered:
        return Answer(call=(CALCULATOR, {"expression": "6 * 7"}))
    return Answer(f"Reply {number}: {newest[:40]}")


def _read_pages(pages: int, tokens: int, read: int, number: int) -> Answer:
    if read < pages:
        return Answer(call=(PYTHON_INTERPRETER, {"python_code": page_code(read + 1, tokens)}))
    return Answer(f"Reply {number}: read {pages} pages")


def _openai_orphan(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """OpenAI's error for the first tool message that answers no call, or tool calls left unanswered."""
    calls: list[str] = []
    unanswered: list[str] = []
    called_at = 0
    for index, message in enumerate(messages):
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in calls:
                return _openai_invalid(OPENAI_TOOL_WITHOUT_CALL, index)
            unanswered = [i for i in unanswered if i != message.get("tool_call_id")]
            continue
        if unanswered:
            break
        calls = [call.get("id") for call in message.get("tool_calls") or []]
        unanswered, called_at = list(calls), index
    if unanswered:
        return _openai_invalid(OPENAI_CALL_WITHOUT_TOOL.format(ids=", ".join(unanswered)), called_at)
    return None


def _openai_invalid(message: str, index: int) -> dict[str, Any]:
    return {"message": message, "type": "invalid_request_error", "param": f"messages.[{index}].role", "code": None}


def _openai_too_long(prompt: int, limit: int | None) -> dict[str, Any] | None:
    if limit is None or prompt <= limit:
        return None
    message = OPENAI_TOO_LONG.format(limit=limit, tokens=prompt)
    return {"message": message, "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}


def _tool_ids(message: dict[str, Any] | None, kind: str, key: str) -> list[str]:
    return [b.get(key, "") for b in _blocks((message or {}).get("content")) if b.get("type") == kind]


def _anthropic_orphan(messages: list[dict[str, Any]]) -> str | None:
    """Anthropic's message for the first `tool_use` without its `tool_result` next, or result without its use."""
    for index, message in enumerate(messages):
        following = messages[index + 1] if index + 1 < len(messages) else None
        results = _tool_ids(following, "tool_result", "tool_use_id")
        missing = [i for i in _tool_ids(message, "tool_use", "id") if i not in results]
        if message.get("role") == "assistant" and missing:
            return ANTHROPIC_USE_WITHOUT_RESULT.format(index=index, ids=", ".join(missing))
        uses = _tool_ids(messages[index - 1], "tool_use", "id") if index else []
        for block, content in enumerate(_blocks(message.get("content"))):
            if content.get("type") == "tool_result" and content.get("tool_use_id") not in uses:
                return ANTHROPIC_RESULT_WITHOUT_USE.format(index=index, block=block, id=content.get("tool_use_id"))
    return None


def _anthropic_too_long(prompt: int, limit: int | None) -> str | None:
    return None if limit is None or prompt <= limit else ANTHROPIC_TOO_LONG.format(tokens=prompt, limit=limit)


def _anthropic_invalid(message: str) -> JSONResponse:
    error = {"type": "invalid_request_error", "message": message}
    return JSONResponse({"type": "error", "error": error}, status_code=400)


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
        error = _openai_orphan(body.get("messages") or []) or _openai_too_long(prompt, providers.input_limit)
        if error is not None:
            providers.requests.append(Recorded("openai", body, {}, prompt, error["message"]))
            return JSONResponse({"error": error}, status_code=400)
        cached = providers.openai_cache.call(blocks)
        answer = _answer(body, number)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": 5,
            "total_tokens": prompt + 5,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        providers.requests.append(Recorded("openai", body, usage, prompt))
        calls = None
        if answer.call:
            name, arguments = answer.call
            function = {"name": name, "arguments": json.dumps(arguments)}
            calls = [{"id": f"call_{number}", "type": "function", "function": function}]
        finish = "tool_calls" if calls else "length" if answer.cut_off else "stop"
        head = {"id": f"chatcmpl-{number}", "created": int(time.time()), "model": body.get("model", "")}
        if not body.get("stream"):
            message = {"role": "assistant", "content": answer.text or None, **({"tool_calls": calls} if calls else {})}
            choice = {"index": 0, "message": message, "finish_reason": finish}
            return JSONResponse({**head, "object": "chat.completion", "choices": [choice], "usage": usage})
        chunk = {**head, "object": "chat.completion.chunk"}
        delta: dict[str, Any] = {"tool_calls": [{"index": 0, **calls[0]}]} if calls else {"content": answer.text}
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
        blocks, breakpoints = anthropic_blocks(body, COUNTER.text)
        prompt = sum(tokens for _, tokens in blocks)
        refused = _anthropic_orphan(body.get("messages") or []) or _anthropic_too_long(prompt, providers.input_limit)
        if refused is not None:
            providers.requests.append(Recorded("anthropic", body, {}, prompt, refused))
            return _anthropic_invalid(refused)
        try:
            cached = providers.anthropic_cache.call(blocks, breakpoints)
        except TooManyBreakpoints as too_many:
            return _anthropic_invalid(str(too_many))
        usage = {
            "input_tokens": cached.input_tokens,
            "output_tokens": 5,
            "cache_creation_input_tokens": cached.cache_creation_input_tokens,
            "cache_read_input_tokens": cached.cache_read_input_tokens,
        }
        providers.requests.append(Recorded("anthropic", body, usage, prompt))
        answer = _answer(body, number)
        use = None
        if answer.call:
            name, arguments = answer.call
            use = {"type": "tool_use", "id": f"toolu_{number}", "name": name, "input": arguments}
        block = use or {"type": "text", "text": answer.text}
        stop = "tool_use" if use else "max_tokens" if answer.cut_off else "end_turn"
        message = {"id": f"msg_{number}", "type": "message", "role": "assistant", "model": body.get("model", "")}
        if not body.get("stream"):
            ending = {"stop_reason": stop, "stop_sequence": None}
            return JSONResponse({**message, "content": [block], **ending, "usage": usage})
        start = {**block, "input": {}} if use else {"type": "text", "text": ""}
        partial = {"type": "input_json_delta", "partial_json": json.dumps(block.get("input"))}
        delta = partial if use else {"type": "text_delta", "text": answer.text}
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
