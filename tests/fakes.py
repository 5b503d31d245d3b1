"""Fakes for the fold logic: an in-memory `SessionStore` and a summarizer that records its input."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from langchain_core.messages import BaseMessage

from langflow_summarizing_agent.state import Cursor, MemoryState, StoredMessage
from tests.fake_chat_model import FakeChatModel

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def make_messages(texts: list[str], *, start: int = 0, same_timestamp: bool = False) -> list[StoredMessage]:
    """Alternating user/assistant messages, one second apart (or all at one instant)."""
    messages = []
    for offset, text in enumerate(texts):
        index = start + offset
        stamp = T0 if same_timestamp else T0 + timedelta(seconds=index)
        role = "user" if index % 2 == 0 else "assistant"
        messages.append(StoredMessage(id=f"m{index:06d}", timestamp=stamp, role=role, text=text))
    return messages


class InMemoryStore:
    """A `SessionStore` over a list, with the same compare-and-swap contract as the database one."""

    def __init__(self, messages: list[StoredMessage] | None = None) -> None:
        self.messages: list[StoredMessage] = list(messages or [])
        self.state: MemoryState | None = None
        self.saves = 0
        self.reads = 0

    def add(self, *texts: str) -> None:
        self.messages.extend(make_messages(list(texts), start=len(self.messages)))

    async def load_state(self) -> MemoryState:
        return replace(self.state, pinned=dict(self.state.pinned)) if self.state else MemoryState()

    async def load_turn(self, limit: int) -> tuple[MemoryState, list[StoredMessage]]:
        state = await self.load_state()
        return state, await self.recent(limit, after=state.cursor)

    async def save_state(self, state: MemoryState, expected_version: int) -> bool:
        current = self.state.version if self.state else 0
        if current != expected_version:
            return False
        self.state = replace(state, pinned=dict(state.pinned), version=expected_version + 1)
        self.saves += 1
        return True

    async def recent(self, limit: int, after: Cursor | None = None) -> list[StoredMessage]:
        self.reads += 1
        ordered = sorted(self.messages, key=lambda m: m.cursor)
        return [m for m in ordered if after is None or m.cursor > after][-limit:]

    async def after(self, cursor: Cursor | None, limit: int) -> list[StoredMessage]:
        self.reads += 1
        ordered = sorted(self.messages, key=lambda m: m.cursor)
        return [m for m in ordered if cursor is None or m.cursor > cursor][:limit]

    async def count_after(self, cursor: Cursor | None, before: Cursor) -> int:
        self.reads += 1
        return sum(1 for m in self.messages if (cursor is None or m.cursor > cursor) and m.cursor < before)


class RecordingSummarizer:
    """The fold logic's summarizer: a `FakeChatModel` that records the prompts it receives.

    `answers` are the next fold answers, in order (a text or an exception to raise); after them the model's facts
    answer.
    """

    def __init__(self, answers: list[str | BaseException] | None = None) -> None:
        self.model = FakeChatModel(fold_script=list(answers or []))

    async def __call__(self, prompt: list[BaseMessage]) -> str:
        return await self.model.respond(prompt)

    @property
    def prompts(self) -> list[list[BaseMessage]]:
        return self.model.calls

    @property
    def answers(self) -> list[str | BaseException]:
        return self.model.fold_script

    @property
    def calls(self) -> int:
        return len(self.model.calls)
