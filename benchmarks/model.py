"""The benchmark's chat models: offline, scripted turn by turn, behind both the agent and its folds (one prompt cache).

Each call is recorded with its input, cached and written tokens (`benchmarks.billing`) and the numbers of the stored
messages it received (`benchmarks.fidelity`): an agent call's history messages that are a message's full text or a
message cut to fit the budget, a fold's `<conversation>` messages (a text cut at `MAX_MESSAGE_CHARS` and ending " …"
counts as its message, as does one cut to fit the budget on the agent's prefix). `BenchmarkChatModel` is billed by
OpenAI's rule; `BenchmarkAnthropicModel`, a `ChatAnthropic` on which the component sets its breakpoints, by
Anthropic's on the request body `ChatAnthropic` builds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from langchain_anthropic import ChatAnthropic
from langchain_anthropic.chat_models import convert_to_anthropic_tool
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from benchmarks.billing import COUNTER, anthropic_usage, openai_usage
from benchmarks.script import Exchange
from langflow_summarizing_agent.engine.settings import DEFAULT_SUMMARY_WORDS, MAX_MESSAGE_CHARS
from langflow_summarizing_agent.engine.tokens import CUT_MARKER
from tests.support.fake_chat_model import is_fold_prompt, is_prefix_fold, parse_fold_prompt
from tests.support.prompt_caches import AnthropicCache, OpenAICache

CALCULATOR_TOOL = "evaluate_expression"
PROJECT = re.compile(r"\bPRJ-\d+\b")
CLUSTER = re.compile(r"\b([A-Z]{2}) (?:cluster\b|集群)")
WORD = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]{1,2}|[^\s\u3400-\u9fff\uf900-\ufaff]+")
"""A word of a summary: a run of characters between spaces, or two Chinese characters (an average Chinese word)."""
SUMMARY_WORDS = DEFAULT_SUMMARY_WORDS - 20
"""The scripted summarizer writes summaries this long, as a real one filling the word budget would."""
WORDS_PER_BULLET = 20


@dataclass(frozen=True)
class ModelCall:
    exchange: int
    kind: str  # "agent" or "summary" (a fold)
    input_tokens: int
    cached_tokens: int  # read from the cache
    written_tokens: int  # written to the cache at a price (Anthropic's)
    first_facts: bool  # the input holds both facts of the session's first message (PRJ-123 and the EU cluster)
    history_tokens: int = 0  # agent call: tokens of the history part, as the engine counts them
    verbatim: tuple[int, ...] = ()  # agent call: numbers of the stored messages its history holds verbatim
    cut: tuple[tuple[int, int], ...] = ()  # agent call: (number, characters sent) of its messages cut to fit
    folded: tuple[int, ...] = ()  # summary call: numbers of the stored messages in its `<conversation>` block
    failed: bool = False
    on_prefix: bool = False  # summary call: a fold on the agent's prefix (its last message is the fold instruction)
    prefix_read: bool = False  # summary call on the wire: starts with the previous agent call's messages, read cached


def holds_first_facts(messages: list[BaseMessage]) -> bool:
    text = "\n".join(str(message.content) for message in messages)
    return "PRJ-123" in text and re.search(r"\bEU\b", text) is not None


def history_part(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The messages after the system prompt and before the current input (the last human message)."""
    start = 1 if messages and isinstance(messages[0], SystemMessage) else 0
    last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=start)
    return messages[start:last_human]


def agent_parts(messages: list[BaseMessage], numbers: dict[str, int]) -> dict[str, Any]:
    """What an agent call's history holds (`ModelCall.history_tokens`, `verbatim`, `cut`), stored messages known by
    their texts (`numbers`)."""
    history = history_part(messages)
    texts = [str(m.content) for m in history]
    cut = [(n, len(t)) for t in texts if t.endswith(CUT_MARKER) for n in starting(t[: -len(CUT_MARKER)], numbers)]
    verbatim = tuple(numbers[t] for t in texts if t in numbers)
    return {"history_tokens": COUNTER.prompt(history), "verbatim": verbatim, "cut": tuple(cut)}


def fold_parts(messages: list[BaseMessage], numbers: dict[str, int]) -> dict[str, Any]:
    """What a fold call folds (`ModelCall.folded`) and whether it asks on the agent's prefix (`on_prefix`)."""
    found = []
    for message in parse_fold_prompt(messages).conversation:
        text = message["text"]
        if text in numbers:
            found.append(numbers[text])
        elif text.endswith(" …") and len(text) - 2 >= MAX_MESSAGE_CHARS:
            found += starting(text[:-2], numbers)
        elif text.endswith(CUT_MARKER):  # on the agent's prefix, as the agent saw it
            found += starting(text[: -len(CUT_MARKER)], numbers)
    return {"folded": tuple(found), "on_prefix": is_prefix_fold(messages)}


def starting(head: str, numbers: dict[str, int]) -> list[int]:
    """The number of the stored message a cut text `head` begins, as a list of none or one."""
    return [n for full, n in numbers.items() if full.startswith(head)][:1]


class BenchmarkChatModel(BaseChatModel):
    """Answers agent calls from `plan` (its `tool_calls` calculator calls, one a call, then its reply) and folds with a
    deterministic summary; records every call."""

    plan: Exchange | None = None
    fail_summaries: bool = False  # every fold raises, as a provider outage would
    caches: bool = True  # False: a provider that caches nothing
    message_numbers: dict[str, int] = Field(default_factory=dict)
    calls: list[ModelCall] = Field(default_factory=list)
    tool_names: list[str] = Field(default_factory=list)
    prompt_cache: Any = Field(default_factory=OpenAICache)

    @property
    def _llm_type(self) -> str:
        return "benchmark-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        # As LangChain's OpenAI model does: the tools in OpenAI's function-tool format, bound as a call argument.
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        self.tool_names = [str(tool["function"]["name"]) for tool in formatted]
        return self.bind(tools=formatted)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if (plan := self.plan) is None:
            msg = "BenchmarkChatModel needs its plan, the exchange, before each exchange"
            raise RuntimeError(msg)
        real, cached, written = self._usage(messages, stop, **kw)
        usage: Any = {"input_tokens": real, "output_tokens": 0, "total_tokens": real}
        usage["input_token_details"] = {"cache_read": cached, "cache_creation": written}
        record: dict[str, Any] = {"exchange": plan.index, "input_tokens": real, "cached_tokens": cached}
        record |= {"written_tokens": written, "first_facts": holds_first_facts(messages)}
        if is_fold_prompt(messages):
            fold = parse_fold_prompt(messages)
            record |= {**fold_parts(messages, self.message_numbers), "failed": self.fail_summaries}
            self.calls.append(ModelCall(**record, kind="summary"))
            if self.fail_summaries:
                msg = "summary provider unavailable"
                raise RuntimeError(msg)
            answer = AIMessage(content=scripted_summary(fold.summary, fold.conversation), usage_metadata=usage)
        elif len(messages) == 1 and isinstance(messages[0], HumanMessage):
            answer = self._prompt(plan, str(messages[0].content), record, usage)
        else:
            self.calls.append(ModelCall(**record, kind="agent", **agent_parts(messages, self.message_numbers)))
            answer = self._agent_answer(plan, messages, usage)
        return ChatResult(generations=[ChatGeneration(message=answer)])

    def _usage(self, messages: list[BaseMessage], stop: Any, **kw: Any) -> tuple[int, int, int]:
        real, cached, written = openai_usage(self.prompt_cache, messages, kw.get("tools") or [])
        return real, cached if self.caches else 0, written

    def _agent_answer(self, plan: Exchange, messages: list[BaseMessage], usage: Any) -> AIMessage:
        last_human = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        done = sum(1 for m in messages[last_human:] if isinstance(m, ToolMessage))
        if done >= plan.tool_calls:
            return AIMessage(content=plan.reply, usage_metadata=usage)
        if CALCULATOR_TOOL not in self.tool_names:
            msg = f"the Agent did not bind its calculator tool ({CALCULATOR_TOOL}); keep add_calculator_tool=True"
            raise RuntimeError(msg)
        call = {"name": CALCULATOR_TOOL, "args": {"expression": plan.expression}, "id": f"call_{plan.index}_{done}"}
        return AIMessage(content="", tool_calls=[{**call, "type": "tool_call"}], usage_metadata=usage)

    def _prompt(self, plan: Exchange, prompt: str, record: dict[str, Any], usage: Any) -> AIMessage:
        """A flow that builds its own prompt (a message history into a Prompt): one user message, no tools. Its
        history is the prompt less the question; its verbatim messages those whose full text it holds."""
        history = "".join(prompt.rsplit(plan.user_text, 1))
        held = sorted(
            (t for t, n in self.message_numbers.items() if n < 2 * plan.index and t in prompt), key=prompt.index
        )
        verbatim = tuple(self.message_numbers[t] for t in held)
        self.calls.append(ModelCall(**record, kind="agent", history_tokens=COUNTER.text(history), verbatim=verbatim))
        return AIMessage(content=plan.reply, usage_metadata=usage)


class BenchmarkAnthropicModel(BenchmarkChatModel, ChatAnthropic):
    """The scripted model as Anthropic's client, so that the component sets its breakpoints on the agent's calls and
    its fold: each call is billed by Anthropic's rule on the request body `ChatAnthropic` builds, and sent nowhere."""

    model: str = "claude-sonnet-4-5"
    disable_streaming: bool = True

    prompt_cache: Any = Field(default_factory=AnthropicCache)

    @property
    def _llm_type(self) -> str:
        return "anthropic-chat"  # ChatAnthropic sends a top-level `cache_control` to its own API's type only

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.tool_names = [str(convert_to_anthropic_tool(tool)["name"]) for tool in tools]
        return ChatAnthropic.bind_tools(self, tools, **kwargs)

    def _usage(self, messages: list[BaseMessage], stop: Any, **kw: Any) -> tuple[int, int, int]:
        return anthropic_usage(self.prompt_cache, self._get_request_payload(messages, stop=stop, **kw), messages)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return self._generate(messages, stop, **kw)


def scripted_summary(previous: str, conversation: list[dict[str, str]]) -> str:
    """A fold answer from the previous summary and the messages to fold: pinned facts by pattern, one bullet per user
    message, the oldest bullets dropped to stay just under the word budget, as a real summarizer's would."""
    pinned: dict[str, str] = {}
    bullets = [line for line in previous.splitlines() if line.startswith("- ")]
    for message in conversation:
        text = message["text"]
        if project := PROJECT.search(text):
            pinned["project_id"] = project.group(0)
        if cluster := CLUSTER.search(text):
            pinned["cluster"] = cluster.group(0)
        if message["role"] == "user":
            bullets.append("- " + _first_words(text, WORDS_PER_BULLET))
    while sum(len(WORD.findall(b)) for b in bullets) > SUMMARY_WORDS and len(bullets) > 1:
        bullets.pop(0)
    return json.dumps({"pinned": pinned, "summary": "\n".join(bullets) or "- nothing yet"})


def _first_words(text: str, count: int) -> str:
    """The first `count` words of `text` (`WORD`), its whitespace collapsed to single spaces."""
    words = list(WORD.finditer(text))
    end = words[min(count, len(words)) - 1].end() if words else 0
    return " ".join(text[:end].split())
