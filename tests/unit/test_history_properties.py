"""The Summarizing Message History's part of the verbatim policy, over generated sessions.

At any Number of Messages and Fold Batch, after every turn:
- the window is the stock Message History's: the newest Number of Messages stored rows, the current input among
  them (Chat Input stored it first), word for word;
- no fold takes a message of that window;
- every older message reaches the output, folded into the summary or word for word, never both, never neither;
- the output is the summary first, then the window in the order the component is set to (Ascending or Descending).
"""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st
from lfx.schema.message import Message

from langflow_summarizing_agent.components.summarizing_agent.summarizing_message_history import (
    SummarizingMessageHistoryComponent,
)
from langflow_summarizing_agent.engine.fold import SaveFailures
from langflow_summarizing_agent.engine.turn import fold_if_due
from langflow_summarizing_agent.wiring import history_turn
from tests.support.fakes import InMemoryStore, RecordingSummarizer


@settings(max_examples=80, deadline=None)
@given(
    n_messages=st.integers(1, 12),
    fold_batch=st.integers(1, 6),
    exchanges=st.integers(1, 20),
    descending=st.booleans(),
)
def test_the_window_is_the_stock_one_and_every_older_message_reaches_the_output(
    n_messages: int, fold_batch: int, exchanges: int, descending: bool
) -> None:
    component = SummarizingMessageHistoryComponent()
    component.set(
        n_messages=n_messages,
        fold_batch=fold_batch,
        history_token_budget=0,
        summarize_older_messages=True,
        order="Descending" if descending else "Ascending",
    )
    fold_settings = history_turn.settings_of(component)
    assert fold_settings is not None, "memory is on"
    store, summarizer, failures = InMemoryStore(), RecordingSummarizer(), SaveFailures()

    async def session() -> None:
        for exchange in range(exchanges):
            store.add(f"#{2 * exchange} question")  # the input, stored before the history reads
            turn = await fold_if_due(store, summarizer, fold_settings, failures=failures)
            stored = [message.text for message in store.messages_stored]
            sent = [message.text for message in turn.plan.send]
            folded = store.summary.folded_count if store.summary is not None else 0

            stock_window = stored[-n_messages:]
            assert sent[-len(stock_window) :] == stock_window
            assert folded <= len(stored) - len(stock_window), "a fold took a message of the window"
            assert turn.plan.not_summarized == 0
            assert stored[:folded] + sent == stored, "an older message is neither folded nor sent, or both"

            summary = turn.plan.summary_text
            messages = [*([Message(text=summary)] if summary else []), *(Message(text=text) for text in sent)]
            output = history_turn._as_history(messages, bool(summary), descending=history_turn._descending(component))
            assert (output.summary.text if output.summary else None) == (summary or None)
            assert [message.text for message in output.window] == (sent[::-1] if descending else sent)
            store.add(f"#{2 * exchange + 1} answer")

    asyncio.run(session())
