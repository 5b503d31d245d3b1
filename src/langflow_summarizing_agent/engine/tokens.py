"""Token counting and cutting: how big a message is, and a message cut to fit what is left of a budget."""

from __future__ import annotations

from dataclasses import replace

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from langflow_summarizing_agent.engine.records import StoredMessage

CUT_MARKER = "\n[... cut to fit the history budget]"
"""Ends a message cut to fit the History Token Budget."""


def message_tokens(message: StoredMessage) -> int:
    return count_tokens_approximately([as_lc_message(message)])


def text_tokens(text: str) -> int:
    return count_tokens_approximately([HumanMessage(content=text)])


def prompt_tokens(prompt: list[BaseMessage]) -> int:
    return count_tokens_approximately(prompt)


def as_lc_message(message: StoredMessage) -> BaseMessage:
    if message.role == "user":
        return HumanMessage(content=message.text)
    return AIMessage(content=message.text)


def cut_to_tokens(message: StoredMessage, room: int) -> StoredMessage:
    """A copy of `message` cut to at most `room` tokens, with a marker; the payload is rebuilt by the caller."""
    if message_tokens(message) <= room:
        return message
    overhead = message_tokens(replace(message, text="")) - text_tokens("")
    return replace(message, text=cut_text_to_tokens(message.text, room - overhead), payload=None)


def cut_text_to_tokens(text: str, room: int) -> str:
    """`text` cut to at most `room` tokens (as `text_tokens` counts them), ending with `CUT_MARKER`."""
    keep = len(text)
    while keep > 0:
        keep = min(keep - 1, int(keep * room / max(text_tokens(text[:keep] + CUT_MARKER), 1)))
        cut = text[: max(keep, 0)] + CUT_MARKER
        if text_tokens(cut) <= room:
            return cut
    return CUT_MARKER
