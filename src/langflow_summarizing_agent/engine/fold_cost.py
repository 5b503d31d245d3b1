"""What a catch-up's folds cost, as a version keeps it (`records.Change`): calls, input and output tokens and the
cached share, as the provider reported each summary call (`ReportedAnswer`) or, where it reported none, counted."""

from __future__ import annotations

from dataclasses import replace

from langflow_summarizing_agent.engine.records import Change
from langflow_summarizing_agent.engine.tokens import TokenCounter

__all__ = ["NO_COST", "ReportedAnswer", "answer_cost", "with_spent"]

NO_COST = Change(kind="fold")
"""A catch-up's cost before its first summary call."""


class ReportedAnswer(str):
    """A summary model's answer with the usage its provider reported for the call: input, output and cached input
    tokens. A version's cost uses them where given, else what the turn's counter counts (`Change`)."""

    input_tokens: int
    output_tokens: int
    cached_tokens: int

    def __new__(cls, text: str, *, input_tokens: int, output_tokens: int, cached_tokens: int) -> ReportedAnswer:
        answer = super().__new__(cls, text)
        answer.input_tokens, answer.output_tokens, answer.cached_tokens = input_tokens, output_tokens, cached_tokens
        return answer


def answer_cost(cost: Change, last_counted: int, answer: str, counter: TokenCounter) -> Change:
    """The cost with the last call's answer: its output tokens, and where the provider reported them, its input
    tokens (in place of `last_counted`, what the counter counted for its prompt) and cached input tokens."""
    if not isinstance(answer, ReportedAnswer):
        return replace(cost, output_tokens=cost.output_tokens + counter.text(answer))
    return replace(
        cost,
        input_tokens=cost.input_tokens - last_counted + answer.input_tokens,
        output_tokens=cost.output_tokens + answer.output_tokens,
        cached_tokens=(cost.cached_tokens or 0) + answer.cached_tokens,
    )


def with_spent(cost: Change, spent: Change) -> Change:
    """`cost` with the calls and tokens of `spent` added."""
    cached = None if cost.cached_tokens is None and spent.cached_tokens is None else 0
    return replace(
        cost,
        calls=cost.calls + spent.calls,
        input_tokens=cost.input_tokens + spent.input_tokens,
        output_tokens=cost.output_tokens + spent.output_tokens,
        cached_tokens=None if cached is None else (cost.cached_tokens or 0) + (spent.cached_tokens or 0),
    )
