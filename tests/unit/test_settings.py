"""Settings that make no sense are refused with a message that says what to change: by the fold settings themselves,
and when a number is edited on the component (before any run). No Langflow services."""

from __future__ import annotations

import pytest
from lfx.schema.dotdict import dotdict

from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import SummarizingAgentComponent
from langflow_summarizing_agent.engine.settings import FoldSettings

PINNED = ("project_id", "cluster")
NONSENSE = [
    ("fold_batch", 0, "Fold Batch must be at least 1"),
    ("summary_words", 5, "Summary Word Budget must be at least 20"),
    ("history_token_budget", 50, "History Token Budget must be 0 (off) or at least 200"),
    ("history_token_budget", 300, "Raise History Token Budget to at least"),
    ("max_folds_per_turn", 0, "Max Folds per Turn must be at least 1"),
    ("summary_timeout", -1, "Summary Timeout (s) must be a positive number of seconds"),
    ("n_messages", -3, "Number of Chat History Messages must be 0 (no memory) or more"),
    ("fold_batch", "many", "Fold Batch must be a whole number"),
]


def template_of(component: SummarizingAgentComponent) -> dotdict:
    node = component.to_frontend_node()
    return dotdict(node["data"]["node"]["template"])


# The fold settings


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param({"fold_batch": 0}, "Fold Batch must be at least 1", id="batch-zero"),
        pytest.param({"history_token_budget": -5}, "History Token Budget must be 0", id="budget-negative"),
        pytest.param({"n_messages": -1}, "at least 1", id="n-negative"),
        pytest.param(
            {"history_token_budget": 800, "summary_words": 300, "pinned_keys": PINNED},
            r"Raise History Token Budget to at least \d+, or lower Summary Word Budget",
            id="budget-too-small-for-the-summary-and-the-newest-exchange",
        ),
    ],
)
def test_fold_settings_that_make_no_sense_are_refused_with_what_to_change(values: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FoldSettings(**values)


def test_a_budget_that_fits_the_summary_and_the_newest_exchange_is_accepted() -> None:
    FoldSettings(history_token_budget=800, summary_words=100, pinned_keys=PINNED)


# Edited on the component


@pytest.mark.parametrize(("field", "value", "message"), NONSENSE)
async def test_a_nonsensical_number_is_refused_when_edited_naming_the_field(field, value, message):
    component = SummarizingAgentComponent()
    template = template_of(component)
    template[field]["value"] = value

    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        await component.update_build_config(template, value, field)


async def test_sensible_numbers_pass_and_the_stock_window_is_free_with_the_switch_off():
    component = SummarizingAgentComponent()
    template = template_of(component)
    for field, value in [("fold_batch", 4), ("history_token_budget", 0), ("summary_timeout", 0), ("n_messages", 0)]:
        template[field]["value"] = value
        await component.update_build_config(template, value, field)

    template["summarize_older_messages"]["value"] = False
    template["fold_batch"]["value"] = 0
    for stock_window in (1, -1):
        await component.update_build_config(template, stock_window, "n_messages")


def test_with_a_provider_that_caches_a_fold_waits_for_twice_fold_batch():
    from langflow_summarizing_agent.engine.settings import CACHED_FOLD_BATCH_FACTOR, DEFAULT_FOLD_BATCH, settings_from

    assert settings_from({}).fold_batch == DEFAULT_FOLD_BATCH
    assert settings_from({}, prompt_cache=True).fold_batch == CACHED_FOLD_BATCH_FACTOR * DEFAULT_FOLD_BATCH
    assert settings_from({"fold_batch": 5}, prompt_cache=True).fold_batch == 5 * CACHED_FOLD_BATCH_FACTOR
