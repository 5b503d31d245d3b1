"""The benchmark's chat model: offline, scripted turn by turn, and it records what every call received.

It stands in for a provider behind both the Agent and the summary fold (the component folds with the Agent's own
model, so both kinds of call share one prompt cache). Every call is recorded with its input tokens, counted with
LangChain's `count_tokens_approximately` over exactly the messages the call received, the same way for every run; with
its real tokens (o200k) and the tokens automatic prefix caching would serve from the cache (`benchmarks.billing`:
agent calls with the JSON schemas of the tools bound by `bind_tools`, fold calls without tools); and with the stored
messages it received, by their number in the session (`message_numbers`, from the script's unique texts):
- an agent call: the history messages (between the system prompt and the current input) whose content is a stored
  message's full text; the summary message (it starts with `SUMMARY_PREFIX`) and cut excerpts are not among them;
- a summary call: the messages of its `<conversation>` block, each the full text or, when longer than
  `MAX_MESSAGE_CHARS`, its first `MAX_MESSAGE_CHARS` characters followed by " …".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from lfx.custom.custom_component.component import Component
from lfx.field_typing import LanguageModel
from lfx.io import Output
from pydantic import Field

from benchmarks.billing import PromptCache, real_tokens
from langflow_summarizing_agent.engine.prompt import FOLD_INSTRUCTION, FOLD_SYSTEM_PROMPT, SUMMARY_PREFIX
from langflow_summarizing_agent.engine.settings import DEFAULT_SUMMARY_WORDS, MAX_MESSAGE_CHARS
from langflow_summarizing_agent.engine.tokens import MESSAGE_FRAMING

FOLD_PROMPT_START = FOLD_SYSTEM_PROMPT.split("\n", 1)[0]
FOLD_INSTRUCTION_START = FOLD_INSTRUCTION.split("{", 1)[0]
_OPENING, _MARKED = FOLD_INSTRUCTION.split("{fold_id}")[:2]
INSTRUCTION = re.compile(re.escape(_OPENING) + r"(\w+)" + re.escape(_MARKED) + r"\1\b")
"""The fold instruction's opening, its id named twice: a user message that imitates it does not match."""
CALCULATOR_TOOL = "evaluate_expression"
"""Name of the Agent's built-in calculator tool (`add_calculator_tool`)."""

PROJECT = re.compile(r"\bPRJ-\d+\b")
CLUSTER = re.compile(r"\b([A-Z]{2}) (?:cluster\b|集群)")
"""The cluster named in English ("EU cluster") or in Chinese ("EU 集群")."""
WORD = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]{1,2}|[^\s\u3400-\u9fff\uf900-\ufaff]+")
"""A word of a summary: a run of characters between spaces, or two Chinese characters (an average Chinese word)."""
SUMMARY_WORDS = DEFAULT_SUMMARY_WORDS - 20
"""The scripted summarizer writes summaries this long, as a real one filling the word budget would."""
WORDS_PER_BULLET = 20


@dataclass(frozen=True)
class TurnPlan:
    """What the model does in one exchange: `tool_calls` calculator calls, one per model call, then `reply`."""

    exchange: int
    reply: str
    tool_calls: int = 0
    expression: str = "2*2"


@dataclass(frozen=True)
class ModelCall:
    exchange: int
    kind: str
    """"agent" (a call of the agent loop) or "summary" (a fold)."""
    input_tokens: int
    history_tokens: int
    """Tokens of the chat history part: between the system prompt and the current input; 0 for a summary call."""
    first_facts: bool
    """The input holds both facts of the session's first message (PRJ-123 and the EU cluster)."""
    failed: bool = False
    verbatim: tuple[int, ...] = ()
    """Agent call: numbers of the stored messages its history holds verbatim, in the order sent."""
    summary_message: bool = False
    """Agent call: its history holds the summary message."""
    folded: tuple[int, ...] = ()
    """Summary call: numbers of the stored messages in its `<conversation>` block."""
    real_tokens: int = 0
    """Input tokens in OpenAI's o200k encoding, tool schemas and per-message overhead included."""
    cached_tokens: int = 0
    """Of `real_tokens`, those automatic prefix caching serves from the cache (`benchmarks.billing`)."""
    on_prefix: bool = False
    """Summary call: a fold on the agent's prefix (its last message is the fold instruction)."""
    history_real_tokens: int = 0
    """Agent call: `history_tokens` in the model's tokens, o200k and 4 a message, as the Summarizing Agent counts."""


def is_fold_prompt(messages: list[BaseMessage]) -> bool:
    return bool(messages) and (
        (isinstance(messages[0], SystemMessage) and str(messages[0].content).startswith(FOLD_PROMPT_START))
        or is_prefix_fold(messages)
    )


def is_prefix_fold(messages: list[BaseMessage]) -> bool:
    """A fold on the agent's prefix: its last message is the fold instruction."""
    return isinstance(messages[-1], HumanMessage) and INSTRUCTION.match(str(messages[-1].content)) is not None


def quoted_fold_data(messages: list[BaseMessage]) -> str:
    """A fold on the agent's prefix as the data block of a quoted fold prompt: the previous summary (the summary
    message's text) and the messages the instruction names (those after the summary message)."""
    instruction = str(messages[-1].content)
    count = int(re.search(r"Fold the (\d+) messages", instruction).group(1))  # type: ignore[union-attr]
    start = 1 if isinstance(messages[0], SystemMessage) else 0
    summary = ""
    first = str(messages[start].content)
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


def is_prompt_call(messages: list[BaseMessage]) -> bool:
    """A call with one user message and nothing else: a Language Model fed by a Prompt."""
    return len(messages) == 1 and isinstance(messages[0], HumanMessage)


def holds_first_facts(messages: list[BaseMessage]) -> bool:
    text = "\n".join(str(message.content) for message in messages)
    return "PRJ-123" in text and re.search(r"\bEU\b", text) is not None


def history_part(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The messages after the system prompt and before the current input (the last human message)."""
    start = 1 if messages and isinstance(messages[0], SystemMessage) else 0
    last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=start)
    return messages[start:last_human]


class BenchmarkChatModel(BaseChatModel):
    """Answers agent calls from `plan` and fold calls with a deterministic summary; records every call.

    `fail_summaries` makes every fold call raise, as a provider outage would.
    """

    plan: TurnPlan | None = None
    fail_summaries: bool = False
    message_numbers: dict[str, int] = Field(default_factory=dict)
    """Number of each stored message by its exact text; texts not in it are not recorded as stored messages."""
    calls: list[ModelCall] = Field(default_factory=list)
    tool_names: list[str] = Field(default_factory=list)
    tools_json: str = ""
    """The bound tools' schemas as OpenAI receives them (its function-tool format), JSON."""
    prompt_cache: Any = Field(default_factory=PromptCache)
    caches: bool = True
    """The provider caches prompt prefixes; False: nothing is cached, and the usage reports no cached tokens."""

    @property
    def _llm_type(self) -> str:
        return "benchmark-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        # As LangChain's OpenAI model does: the tools in OpenAI's function-tool format, bound as a call argument.
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        self.tool_names = [str(tool["function"]["name"]) for tool in formatted]
        self.tools_json = json.dumps(formatted) if formatted else ""
        return self.bind(tools=formatted)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        if self.plan is None:
            msg = "BenchmarkChatModel needs a TurnPlan before each exchange"
            raise RuntimeError(msg)
        tools = kwargs.get("tools") or []
        tools_json = json.dumps(tools) if tools else ""
        if is_fold_prompt(messages):
            answer = self._fold(messages, tools_json)
        else:
            answer = self._agent(messages, self.plan, tools_json)
        return ChatResult(generations=[ChatGeneration(message=answer)])

    def _agent(self, messages: list[BaseMessage], plan: TurnPlan, tools_json: str) -> AIMessage:
        if is_prompt_call(messages):
            return self._prompt(messages, plan)
        history = [str(message.content) for message in history_part(messages)]
        real, cached = self._call(messages, tools_json)
        usage = _usage(real, cached)
        self.calls.append(
            ModelCall(
                exchange=plan.exchange,
                kind="agent",
                input_tokens=count_tokens_approximately(messages),
                history_tokens=count_tokens_approximately(history_part(messages)),
                history_real_tokens=sum(real_tokens(str(m.content)) + MESSAGE_FRAMING for m in history_part(messages)),
                first_facts=holds_first_facts(messages),
                verbatim=tuple(self.message_numbers[text] for text in history if text in self.message_numbers),
                summary_message=any(text.startswith(SUMMARY_PREFIX) for text in history),
                real_tokens=real,
                cached_tokens=cached,
            )
        )
        last_human = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        tool_results = sum(1 for m in messages[last_human:] if isinstance(m, ToolMessage))
        if tool_results >= plan.tool_calls:
            return AIMessage(content=plan.reply, usage_metadata=usage)
        if CALCULATOR_TOOL not in self.tool_names:
            msg = f"the Agent did not bind its calculator tool ({CALCULATOR_TOOL}); keep add_calculator_tool=True"
            raise RuntimeError(msg)
        call_id = f"call_{plan.exchange}_{tool_results}"
        tool_call = {"name": CALCULATOR_TOOL, "args": {"expression": plan.expression}, "id": call_id}
        return AIMessage(content="", tool_calls=[{**tool_call, "type": "tool_call"}], usage_metadata=usage)

    def _prompt(self, messages: list[BaseMessage], plan: TurnPlan) -> AIMessage:
        """A call of a flow that builds its own prompt (a message history into a Prompt): one user message. Its
        history is the prompt less its question (the current input, the last time the prompt holds it); the stored
        messages it holds verbatim are those whose full text it contains, the current input left out. It calls no
        tools."""
        prompt = str(messages[-1].content)
        question = next((text for text, n in self.message_numbers.items() if n == 2 * plan.exchange), "")
        history = "".join(prompt.rsplit(question, 1)) if question else prompt
        real, cached = self._call(messages, "")
        found = [
            (prompt.index(text), number)
            for text, number in self.message_numbers.items()
            if number < 2 * plan.exchange and text in prompt
        ]
        self.calls.append(
            ModelCall(
                exchange=plan.exchange,
                kind="agent",
                input_tokens=count_tokens_approximately(messages),
                history_tokens=count_tokens_approximately([HumanMessage(content=history)]),
                first_facts=holds_first_facts(messages),
                verbatim=tuple(number for _, number in sorted(found)),
                summary_message=SUMMARY_PREFIX in prompt,
                real_tokens=real,
                cached_tokens=cached,
                history_real_tokens=real_tokens(history) + MESSAGE_FRAMING,
            )
        )
        return AIMessage(content=plan.reply, usage_metadata=_usage(real, cached))

    def _fold(self, messages: list[BaseMessage], tools_json: str) -> AIMessage:
        exchange = self.plan.exchange if self.plan else -1
        real, cached = self._call(messages, tools_json)
        data = quoted_fold_data(messages) if is_prefix_fold(messages) else str(messages[-1].content)
        self.calls.append(
            ModelCall(
                exchange=exchange,
                kind="summary",
                input_tokens=count_tokens_approximately(messages),
                history_tokens=0,
                first_facts=holds_first_facts(messages),
                failed=self.fail_summaries,
                folded=tuple(self._folded_numbers(data)),
                on_prefix=is_prefix_fold(messages),
                real_tokens=real,
                cached_tokens=cached,
            )
        )
        if self.fail_summaries:
            msg = "summary provider unavailable"
            raise RuntimeError(msg)
        return AIMessage(content=scripted_summary(data), usage_metadata=_usage(real, cached))

    def _call(self, messages: list[BaseMessage], tools_json: str) -> tuple[int, int]:
        real, cached = self.prompt_cache.call(messages, tools_json)
        return real, cached if self.caches else 0

    def _folded_numbers(self, data: str) -> list[int]:
        numbers = []
        for message in conversation_block(data):
            text = message["text"]
            if text in self.message_numbers:
                numbers.append(self.message_numbers[text])
            elif text.endswith(" …") and len(text) - 2 >= MAX_MESSAGE_CHARS:
                cut = text[:-2]
                numbers += [number for full, number in self.message_numbers.items() if full.startswith(cut)][:1]
        return numbers


def _usage(real: int, cached: int) -> Any:
    """The usage a provider reports: input tokens, of them those served from its cache."""
    return {
        "input_tokens": real,
        "output_tokens": 0,
        "total_tokens": real,
        "input_token_details": {"cache_read": cached},
    }


def scripted_summary(data: str) -> str:
    """A fold answer from the fold prompt's data: pinned facts by pattern, one bullet per user message.

    Older bullets give way to newer ones so the summary stays just under the word budget, as a real
    summarizer's would.
    """
    previous = _between(data, "Previous summary:\n<summary>\n", "\n</summary>")
    batch = conversation_block(data)
    pinned: dict[str, str] = {}
    bullets = [line for line in previous.splitlines() if line.startswith("- ")]
    for message in batch:
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
    """Hands a `BenchmarkChatModel` to the Agent's model input inside a graph run.

    The model is set as `chat_model` after construction: a component input would be copied, and the benchmark
    reads the calls off the very model object the Agent used.
    """

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
