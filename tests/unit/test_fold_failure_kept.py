"""Why the last fold failed is kept with the summary until a fold succeeds, so every later turn (in any worker) can
say it: in a few words (the error's type and first line, at most `FAILURE_CHARS`), never a pinned value nor the
summary a database error quotes."""

from __future__ import annotations

from dataclasses import replace

from langflow_summarizing_agent.engine.fold import FAILURE_CHARS, PINNED_SHOWN_AS, SaveFailures
from langflow_summarizing_agent.engine.records import Change, Summary
from langflow_summarizing_agent.engine.report import memory_step_text, problems
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.turn import fold_if_due, read_and_plan
from tests.support.fakes import T0, InMemoryStore, RecordingSummarizer, make_messages

SETTINGS = FoldSettings(window=2, fold_batch=2, history_token_budget=0, pinned_keys=("project_id",))
LONG_ERROR = "the provider refused the request: " + "quota exceeded for this organization, " * 6


def session(count: int = 6) -> InMemoryStore:
    return InMemoryStore(make_messages([f"message {i}" for i in range(count)]))


async def test_a_failed_fold_stores_why_in_a_few_words_and_a_fold_that_succeeds_clears_it() -> None:
    store = session()

    await fold_if_due(store, RecordingSummarizer([RuntimeError(LONG_ERROR)]), SETTINGS, failures=SaveFailures())

    assert store.summary is not None and store.summary.failed_folds == 1
    failure = store.summary.fold_failure
    assert failure is not None and failure.startswith("RuntimeError: the provider refused the request: quota")
    assert len(failure) == FAILURE_CHARS and failure.endswith("…")

    later = replace(store.summary, retry_after=T0)
    store.summary = later
    await fold_if_due(store, RecordingSummarizer(), SETTINGS, failures=SaveFailures())
    assert (store.summary.failed_folds, store.summary.fold_failure) == (0, None)


async def test_a_failure_that_quotes_a_pinned_value_shows_it_masked() -> None:
    store = session()
    first = store.messages_stored[0].cursor
    store.summary = Summary(text="Earlier.", pinned={"project_id": "PRJ-123"}, cursor=first, folded_count=1, version=1)
    quoting = ValueError("invalid content near 'PRJ-123' in messages[1]")

    turn = await fold_if_due(store, RecordingSummarizer([quoting]), SETTINGS, failures=SaveFailures())

    assert store.summary is not None
    assert store.summary.fold_failure == f"ValueError: invalid content near '{PINNED_SHOWN_AS}' in messages[1]"
    shown = " ".join(problems(turn)) + memory_step_text(turn, SETTINGS.pinned_keys, 0.0)
    assert "PRJ-123" not in shown and PINNED_SHOWN_AS in shown


class SaveFailsWithItsStatement(InMemoryStore):
    """A database error as SQLAlchemy words it: its first line, then the statement and its parameters, where the
    summary is."""

    failed = False

    async def save(self, summary: Summary, change: Change | None = None) -> Summary | None:
        if not self.failed and summary.text:
            self.failed = True
            statement = "[SQL: UPDATE session_memory_state SET summary=?]"
            msg = f"database is locked\n{statement}\n[parameters: ({summary.text!r},)]"
            raise OSError(msg)
        return await super().save(summary, change)


async def test_a_failed_save_keeps_only_the_first_line_of_its_error() -> None:
    store = SaveFailsWithItsStatement(make_messages([f"message {i}" for i in range(6)]))

    turn = await fold_if_due(store, RecordingSummarizer(), SETTINGS, failures=SaveFailures())

    assert store.failed and store.summary is not None
    assert store.summary.fold_failure == "the summary could not be saved (OSError: database is locked)"
    assert all("parameters" not in problem for problem in problems(turn))
    later = await read_and_plan(store, SETTINGS, failures=SaveFailures())
    assert "the summary could not be saved (OSError: database is locked)" in memory_step_text(later, (), 0.0)
