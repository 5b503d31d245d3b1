"""The sessions the plan's property tests generate and read (`test_plan_properties.py`, `test_plan_examples.py`).

Tagged messages (every message starts with a unique tag, `#12 `, so the fold prompt's cut texts still say which
message they are), the Hypothesis strategies of settings, sizes, histories and summarizer answers, and what a turn
folded, sent and counted.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import replace
from datetime import timedelta

from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from langflow_summarizing_agent.engine import plan as engine_plan
from langflow_summarizing_agent.engine.plan import COMPACT_COMMAND, COMPACT_REPLY_PREFIX
from langflow_summarizing_agent.engine.records import Role, StoredMessage
from langflow_summarizing_agent.engine.settings import (
    MAX_MESSAGES_PER_FOLD,
    FoldSettings,
)
from langflow_summarizing_agent.engine.tokens import CUT_MARKER
from langflow_summarizing_agent.engine.turn import Turn
from tests.support.fake_chat_model import parse_fold_prompt
from tests.support.fakes import T0, InMemoryStore

PINNED = ("project_id", "cluster")
ROLES: tuple[Role, Role] = ("user", "assistant")
TAG = re.compile(r"#(\d+) ")
FILLER = "lorem ipsum dolor sit amet "
COMPACT = "compact"
PLAN_TURN = engine_plan.plan_turn
PLAN_COMPACTION = engine_plan.plan_compaction


def tagged_text(index: int, tokens: int) -> str:
    """About `tokens` tokens of text (4 characters each) that starts with the message's own tag."""
    tag = f"#{index} "
    length = max(tokens * 4 - len(tag), 0)
    return tag + (FILLER * (length // len(FILLER) + 1))[:length]


def message_id(index: int) -> str:
    return f"m{index:06d}"


def is_compaction_exchange(message: StoredMessage) -> bool:
    """`/compact` and its reply, by the public contract."""
    if message.role == "user":
        return message.text.strip() == COMPACT_COMMAND
    return message.text.strip().startswith(COMPACT_REPLY_PREFIX)


def message_tokens(message: StoredMessage) -> int:
    """Tokens as LangChain's approximate counter counts them: the unit of History Token Budget."""
    as_sent = HumanMessage(content=message.text) if message.role == "user" else AIMessage(content=message.text)
    return count_tokens_approximately([as_sent])


def text_tokens(text: str) -> int:
    return count_tokens_approximately([HumanMessage(content=text)])


@st.composite
def fold_settings(draw: st.DrawFn) -> FoldSettings:
    chosen = FoldSettings(
        window=draw(st.integers(0, 29)),
        fold_batch=draw(st.integers(1, 20)),
        summary_words=draw(st.sampled_from([20, 60, 300])),
        pinned_keys=draw(st.sampled_from([(), PINNED])),
        max_folds_per_turn=draw(st.integers(1, 4)),
        max_messages_per_fold=draw(st.one_of(st.integers(1, 5), st.just(MAX_MESSAGES_PER_FOLD))),
        history_token_budget=0,
        prompt_cache=draw(st.booleans()),
    )
    least = max(chosen.summary_reserve + chosen.newest_exchange_tokens, 200)
    budget = draw(st.one_of(st.just(0), st.integers(least, least + 1_500), st.integers(least, 20_000)))
    return replace(chosen, history_token_budget=budget)


message_sizes = st.one_of(st.integers(1, 300), st.integers(1, 20_000))
"""Tokens per message: mostly chat-sized, sometimes a pasted log larger than any budget."""

history_events = st.lists(st.one_of(message_sizes, st.just(COMPACT)), max_size=40)
"""Messages stored before the switch is turned on, `/compact` exchanges among them."""

failures = st.sampled_from(
    [
        RuntimeError("provider down"),
        asyncio.TimeoutError(),
        "",
        "{oops",
        '{"pinned": "x", "summary": "s"}',
        '{"pinned": {}}',
    ]
)


@st.composite
def long_answers(draw: st.DrawFn) -> str:
    """A usable answer whose summary may take far more tokens than the Summary Word Budget reserves."""
    words = draw(st.integers(1, 400))
    word_length = draw(st.integers(1, 60))
    pinned = {key: "v" * draw(st.integers(0, 600)) for key in PINNED}
    return json.dumps({"pinned": pinned, "summary": "- " + " ".join(["w" * word_length] * words)})


def fold_batch_ids(prompt: list[BaseMessage]) -> list[str]:
    """The ids of the messages a fold prompt quotes, read from their tags; `/compact` exchanges by their text."""
    ids = []
    for item in parse_fold_prompt(prompt).conversation:
        text = item["text"].strip()
        if text == COMPACT_COMMAND or text.startswith(COMPACT_REPLY_PREFIX):
            ids.append(text)
            continue
        tag = TAG.match(item["text"])
        assert tag, f"a fold prompt quotes a message without its tag: {item['text'][:40]!r}"
        ids.append(message_id(int(tag.group(1))))
    return ids


def session_of(*messages: tuple[Role, str]) -> InMemoryStore:
    return InMemoryStore(
        [StoredMessage(message_id(i), T0 + timedelta(seconds=i), role, text) for i, (role, text) in enumerate(messages)]
    )


def note(count: int) -> str:
    noun = "message is" if count == 1 else "messages are"
    return f"({count} earlier {noun} not summarized yet and not shown.)"


def folded(turn: Turn) -> int:
    return turn.fold.folded if turn.fold else 0


def fold_calls(turn: Turn) -> int:
    return turn.fold.calls if turn.fold else 0


def is_cut_of(sent: StoredMessage, stored: StoredMessage) -> bool:
    return sent.text.endswith(CUT_MARKER) and stored.text.startswith(sent.text[: -len(CUT_MARKER)])
