"""Stored messages back as Langflow objects: what the Agent gets for a message sent word for word."""

from __future__ import annotations

from typing import TYPE_CHECKING

from langflow_summarizing_agent.engine.records import StoredMessage

if TYPE_CHECKING:
    from lfx.schema.message import Message

__all__ = ["as_chat_message"]


async def as_chat_message(message: StoredMessage) -> Message:
    """The Message the stock Agent would get for this row, built exactly as `langflow.memory.aget_messages` does."""
    from langflow.schema.message import Message

    return await Message.create(**message.payload.model_dump())
