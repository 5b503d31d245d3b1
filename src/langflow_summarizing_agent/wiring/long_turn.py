"""The long turn: one agent run's model calls kept within the model's input limit, with the switch on.

The input limit is Model Input Limit on the node, or, when it is 0, the `max_input_tokens` of the model's profile
(LangChain's model profiles); a History Token Budget above it is refused. `LongTurnMiddleware` is LangChain's
`ContextEditingMiddleware` with the rule of `engine.tool_results` as its edit, counting with the turn's counter (the
model's tokenizer scaled by the usage the provider reported). A call the provider still refuses for its length
(`ContextOverflowError`, whatever the limit was) is retried once: every tool result cleared but the newest; then, if
that is still over the limit, the history down to the summary and the newest exchange, the messages it leaves out
folded into the summary for that call (`engine.fold.fold_for_one_call`). If the retry is refused for its length too,
the run ends with a reply that says so. Any other error is not retried.

What the run did shows in the memory step and the status (`LongTurnWatch.note`); what Langflow stores of the run (the
tool calls and their results as content blocks) is untouched: only what the model is sent changes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain.agents.middleware import ContextEditingMiddleware
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from langflow_summarizing_agent.engine.settings import FIELD_NAMES, whole_number
from langflow_summarizing_agent.engine.tokens import TokenCounter
from langflow_summarizing_agent.engine.tool_results import TRIM_AT, Count, clear_all_but_newest, trim_tool_results

logger = logging.getLogger(__name__)

PROFILE = "the model's profile"
"""Where the input limit came from when Model Input Limit is 0."""
LIMIT_IN_ERROR = (
    re.compile(r"maximum context length is (\d+) tokens"),
    re.compile(r"prompt is too long: \d+ tokens > (\d+) maximum"),
)
"""The input limit in OpenAI's and Anthropic's refusals for length."""
UNFIT_REPLY = (
    "I could not answer: this turn does not fit the model's input limit{limit}, even retried with less (earlier tool "
    "results cleared, and the history down to the summary and the newest exchange where its fold succeeded). Ask "
    "for less at once, or use a tool that returns shorter results."
)

HistoryCut = Callable[[list[BaseMessage]], Awaitable[list[BaseMessage] | None]]
"""The messages of a call with the history shortened to the summary and the newest exchange, what it leaves out
folded into the summary; None when nothing can be left out or the fold failed."""


def model_input_limit(value: Any) -> int:
    """Model Input Limit as a number of tokens, 0 when empty (the model's profile); ValueError naming the field."""
    limit = whole_number(value, "model_input_limit") or 0
    if limit < 0:
        msg = f"{FIELD_NAMES['model_input_limit']} must be 0 (from the model's profile) or a number of tokens."
        raise ValueError(msg)
    return limit


def input_limit(given: int | None, model: object) -> tuple[int | None, str]:
    """The model's input limit in tokens and where it came from: Model Input Limit when set, else the model's profile;
    (None, "") when neither says."""
    if given:
        return given, FIELD_NAMES["model_input_limit"]
    profile = getattr(model, "profile", None) or {}
    limit = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    return (limit, PROFILE) if isinstance(limit, int) and limit > 0 else (None, "")


def check_budget(history_token_budget: int, limit: int | None, source: str) -> None:
    """Refuse a History Token Budget the model cannot take in one call."""
    if limit is not None and history_token_budget > limit:
        budget = FIELD_NAMES["history_token_budget"]
        other = f", or set {FIELD_NAMES['model_input_limit']}" if source == PROFILE else ""
        msg = (
            f"{budget} ({history_token_budget} tokens) is more than the model's input limit of {limit} tokens "
            f"({source}). Lower {budget} to at most {limit}{other}."
        )
        raise ValueError(msg)


def limit_in(error: BaseException) -> int | None:
    """The input limit a provider's refusal for length names, if it names one."""
    for pattern in LIMIT_IN_ERROR:
        found = pattern.search(str(error))
        if found:
            return int(found.group(1))
    return None


@dataclass
class LongTurnWatch:
    """What the run's calls did to stay within the limit."""

    limit: int | None = None
    source: str = ""
    cleared: int = 0
    """Tool results the last call had cleared."""
    saved_tokens: int = 0
    """Tokens of cleared results not sent, over the run's calls."""
    retried: int = 0
    unfit: bool = False

    def note(self) -> str | None:
        """One line for the memory step and the status; None when the run needed nothing."""
        parts = []
        if self.cleared:
            parts.append(
                f"{self.cleared} earlier tool result{'s' if self.cleared != 1 else ''} cleared to stay within the "
                f"model's input limit of {self.limit} tokens ({self.source}), {self.saved_tokens} tokens not sent over "
                "the turn's model calls"
            )
        if self.retried:
            parts.append(
                "a call refused for its length was retried with less" + (" and still did not fit" if self.unfit else "")
            )
        return "; ".join(parts) if parts else None


class LongTurnMiddleware(ContextEditingMiddleware):
    """LangChain's context editing with `engine.tool_results`' rule, and one retry of a call refused for its length."""

    def __init__(self, counter: TokenCounter, watch: LongTurnWatch, history_cut: HistoryCut | None = None) -> None:
        super().__init__(edits=[])
        self.counter = counter
        self.watch = watch
        self.history_cut = history_cut
        self.sizes: dict[tuple[str, int], int] = {}

    def _count(self, request: ModelRequest[Any]) -> Count:
        system = [request.system_message] if request.system_message else []
        tools = [_as_tool_json(tool) for tool in request.tools]

        def count(messages: Sequence[BaseMessage]) -> int:
            if len(messages) == 1 and messages[0].id:
                # The rule counts each message of the run on every call: a run's results are counted once.
                key = (messages[0].id, len(str(messages[0].content)))
                if key not in self.sizes:
                    self.sizes[key] = self.counter.prompt(messages) - self.counter.prompt([])
                return self.counter.prompt([*system], tools) + self.sizes[key]
            return self.counter.prompt([*system, *messages], tools)

        return count

    def _trimmed(self, request: ModelRequest[Any]) -> list[AnyMessage]:
        messages = list(request.messages)
        if self.watch.limit is None or not messages:
            return messages
        trim = trim_tool_results(messages, self._count(request), self.watch.limit)
        if trim.cleared:
            self.watch.cleared = trim.cleared
            self.watch.saved_tokens += trim.saved_tokens
        return cast("list[AnyMessage]", trim.messages)

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any] | AIMessage:
        return handler(request.override(messages=self._trimmed(request)))

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelResponse[Any] | AIMessage:
        sent = self._trimmed(request)
        try:
            return await handler(request.override(messages=sent))
        except ContextOverflowError as refused:
            named = limit_in(refused)
            logger.info("Summarizing Agent: a call was refused for its length (%s); retrying once with less", refused)
        # The run's later calls keep below what was refused, as this counter counts it: the provider may count more,
        # or name its whole context window (the reply's room included).
        known = [n for n in (named, self.watch.limit, self._count(request)(sent) - 1) if n is not None]
        limit = min(known)
        if self.watch.limit is None or limit < self.watch.limit:
            self.watch.limit, self.watch.source = limit, "the provider's refusal"
        self.watch.retried += 1
        retry = await self._fitted(request, limit)
        try:
            response = await handler(request.override(messages=retry))
        except ContextOverflowError:
            logger.warning("Summarizing Agent: the retried call was refused for its length too; the turn says so")
            self.watch.unfit = True
            return AIMessage(content=UNFIT_REPLY.format(limit=f" of {named} tokens" if named else ""))
        return response

    async def _fitted(self, request: ModelRequest[Any], limit: int) -> list[AnyMessage]:
        """The refused call's messages with every tool result cleared but the newest; then, unless that cleared some
        and brought the call under the trim threshold, the history shortened (`HistoryCut`)."""
        count = self._count(request)
        trim = clear_all_but_newest(request.messages, count)
        if trim.cleared:
            self.watch.cleared = max(self.watch.cleared, trim.cleared)
            self.watch.saved_tokens += trim.saved_tokens
        if (trim.cleared and trim.tokens <= int(limit * TRIM_AT)) or self.history_cut is None:
            return cast("list[AnyMessage]", trim.messages)
        shortened = await self.history_cut(trim.messages)
        return cast("list[AnyMessage]", shortened if shortened is not None else trim.messages)


def _as_tool_json(tool: object) -> object:
    if isinstance(tool, dict):
        return tool
    try:
        return convert_to_openai_tool(tool)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - a tool that does not convert is counted by its name
        return {"name": getattr(tool, "name", str(tool))}
