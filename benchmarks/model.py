"""The benchmark's chat model: offline, scripted turn by turn, behind both the agent and its folds (one prompt cache).

Each call is recorded with its input and cached tokens (`benchmarks.billing`) and the numbers of the stored messages
it received (`benchmarks.fidelity`): an agent call's history messages that are a message's full text, a fold's
`<conversation>` messages (a text cut at `MAX_MESSAGE_CHARS` and ending " …" counts as its message).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from lfx.custom.custom_component.component import Component
from lfx.field_typing import LanguageModel
from lfx.io import Output
from pydantic import Field

from benchmarks.billing import COUNTER, PromptCache
from benchmarks.script import Exchange
from langflow_summarizing_agent.engine.prompt import FOLD_INSTRUCTION, FOLD_SYSTEM_PROMPT, SUMMARY_PREFIX
from langflow_summarizing_agent.engine.settings import DEFAULT_SUMMARY_WORDS, MAX_MESSAGE_CHARS

FOLD_PROMPT_START = FOLD_SYSTEM_PROMPT.split("\n", 1)[0]
_OPENING, _MARKED = FOLD_INSTRUCTION.split("{fold_id}")[:2]
INSTRUCTION = re.compile(re.escape(_OPENING) + r"(\w+)" + re.escape(_MARKED) + r"\1\b")
"""The fold instruction's opening, its id named twice: a user message that imitates it does not match."""
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
    cached_tokens: int
    first_facts: bool  # the input holds both facts of the session's first message (PRJ-123 and the EU cluster)
    history_tokens: int = 0  # agent call: tokens of the history part, as the engine counts them
    verbatim: tuple[int, ...] = ()  # agent call: numbers of the stored messages its history holds verbatim
    folded: tuple[int, ...] = ()  # summary call: numbers of the stored messages in its `<conversation>` block
    failed: bool = False
    on_prefix: bool = False  # summary call: a fold on the agent's prefix (its last message is the fold instruction)


def is_prefix_fold(messages: list[BaseMessage]) -> bool:
    return isinstance(messages[-1], HumanMessage) and INSTRUCTION.match(str(messages[-1].content)) is not None


def is_fold_prompt(messages: list[BaseMessage]) -> bool:
    quoted = isinstance(messages[0], SystemMessage) and str(messages[0].content).startswith(FOLD_PROMPT_START)
    return quoted or is_prefix_fold(messages)


def quoted_fold_data(messages: list[BaseMessage]) -> str:
    """A fold on the agent's prefix as a quoted fold prompt's data: the previous summary (the summary message's
    text) and the messages the instruction names (those after the summary message)."""
    count = int(re.search(r"Fold the (\d+) messages", str(messages[-1].content)).group(1))  # type: ignore[union-attr]
    start = 1 if isinstance(messages[0], SystemMessage) else 0
    summary, first = "", str(messages[start].content)
    if isinstance(messages[start], HumanMessage) and first.startswith(SUMMARY_PREFIX):
        summary = first.split("Summary:\n", 1)[1].split("\n\n(", 1)[0] if "Summary:\n" in first else ""
        start += 1
    batch = [
        {"role": "user" if isinstance(m, HumanMessage) else "assistant", "text": str(m.content)}
        for m in messages[start : start + count]
    ]
    return (
        f"Previous summary:\n<summary>\n{summary}\n</summary>\n\n"
        f"New messages:\n<conversation>\n{json.dumps(batch, ensure_ascii=False)}\n</conversation>"
    )


def holds_first_facts(messages: list[BaseMessage]) -> bool:
    text = "\n".join(str(message.content) for message in messages)
    return "PRJ-123" in text and re.search(r"\bEU\b", text) is not None


def history_part(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The messages after the system prompt and before the current input (the last human message)."""
    start = 1 if messages and isinstance(messages[0], SystemMessage) else 0
    last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=start)
    return messages[start:last_human]


class BenchmarkChatModel(BaseChatModel):
    """Answers agent calls from `plan` (its `tool_calls` calculator calls, one a call, then its reply) and folds with a
    deterministic summary; records every call."""

    plan: Exchange | None = None
    fail_summaries: bool = False  # every fold raises, as a provider outage would
    caches: bool = True  # False: a provider that caches nothing
    message_numbers: dict[str, int] = Field(default_factory=dict)
    calls: list[ModelCall] = Field(default_factory=list)
    tool_names: list[str] = Field(default_factory=list)
    prompt_cache: Any = Field(default_factory=PromptCache)

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
        real, cached = self.prompt_cache.call(messages, kw.get("tools") or [])
        cached = cached if self.caches else 0
        usage: Any = {"input_tokens": real, "output_tokens": 0, "total_tokens": real}
        usage["input_token_details"] = {"cache_read": cached}
        record = {"exchange": plan.index, "input_tokens": real, "cached_tokens": cached}
        record["first_facts"] = holds_first_facts(messages)
        if is_fold_prompt(messages):
            on_prefix = is_prefix_fold(messages)
            data = quoted_fold_data(messages) if on_prefix else str(messages[-1].content)
            folded = tuple(self._folded_numbers(data))
            self.calls.append(
                ModelCall(**record, kind="summary", folded=folded, failed=self.fail_summaries, on_prefix=on_prefix)
            )
            if self.fail_summaries:
                msg = "summary provider unavailable"
                raise RuntimeError(msg)
            answer = AIMessage(content=scripted_summary(data), usage_metadata=usage)
        elif len(messages) == 1 and isinstance(messages[0], HumanMessage):
            answer = self._prompt(plan, str(messages[0].content), record, usage)
        else:
            history = history_part(messages)
            verbatim = tuple(self.message_numbers[t] for m in history if (t := str(m.content)) in self.message_numbers)
            self.calls.append(
                ModelCall(**record, kind="agent", history_tokens=COUNTER.prompt(history), verbatim=verbatim)
            )
            answer = self._agent_answer(plan, messages, usage)
        return ChatResult(generations=[ChatGeneration(message=answer)])

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
        found = sorted(
            (prompt.index(t), n) for t, n in self.message_numbers.items() if n < 2 * plan.index and t in prompt
        )
        verbatim = tuple(n for _, n in found)
        self.calls.append(ModelCall(**record, kind="agent", history_tokens=COUNTER.text(history), verbatim=verbatim))
        return AIMessage(content=plan.reply, usage_metadata=usage)

    def _folded_numbers(self, data: str) -> list[int]:
        numbers = []
        for message in conversation_block(data):
            text = message["text"]
            if text in self.message_numbers:
                numbers.append(self.message_numbers[text])
            elif text.endswith(" …") and len(text) - 2 >= MAX_MESSAGE_CHARS:
                numbers += [n for full, n in self.message_numbers.items() if full.startswith(text[:-2])][:1]
        return numbers


def scripted_summary(data: str) -> str:
    """A fold answer from the fold prompt's data: pinned facts by pattern, one bullet per user message, the oldest
    bullets dropped to stay just under the word budget, as a real summarizer's would."""
    previous = _between(data, "Previous summary:\n<summary>\n", "\n</summary>")
    pinned: dict[str, str] = {}
    bullets = [line for line in previous.splitlines() if line.startswith("- ")]
    for message in conversation_block(data):
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


def conversation_block(data: str) -> list[dict[str, str]]:
    """The messages quoted in a fold prompt's `<conversation>` block (JSON, so `<\\/` reads back as `</`)."""
    return json.loads(_between(data, "<conversation>\n", "\n</conversation>"))


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


class BenchmarkModelComponent(Component):
    """Hands its `chat_model`, set after construction (an input would be copied), to the Agent's model input."""

    display_name = "Benchmark Model"
    description = "Offline scripted chat model of the support-session benchmark."
    name = "BenchmarkModel"

    inputs = []  # noqa: RUF012 - Langflow declares inputs as a class list
    outputs = [Output(display_name="Language Model", name="model_output", method="build_model")]  # noqa: RUF012

    chat_model: BenchmarkChatModel | None = None

    def build_model(self) -> LanguageModel:
        if self.chat_model is None:
            msg = "set BenchmarkModelComponent.chat_model before the graph runs"
            raise RuntimeError(msg)
        return self.chat_model
