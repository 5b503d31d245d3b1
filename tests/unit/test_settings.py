"""Settings that make no sense are refused with a message that says what to change: by the fold settings themselves,
and when a number is edited on the component (before any run). No Langflow services."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lfx.custom.custom_component.component import Component
from lfx.io import FloatInput, IntInput
from lfx.schema.dotdict import dotdict

from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import (
    STOCK_N_MESSAGES,
    SummarizingAgentComponent,
)
from langflow_summarizing_agent.components.summarizing_agent.summarizing_message_history import (
    SummarizingMessageHistoryComponent,
)
from langflow_summarizing_agent.engine.settings import (
    CHECKED_FIELDS,
    LEAST,
    MAX_PINNED_KEY_CHARS,
    MAX_PINNED_KEYS,
    MIN_HISTORY_TOKEN_BUDGET,
    FoldSettings,
    least_history_token_budget,
    pinned_key_of,
    pinned_keys_from,
    settings_from,
    settled,
)

PINNED = ("project_id", "cluster")


def template_of(component: SummarizingAgentComponent) -> dotdict:
    node = component.to_frontend_node()
    return dotdict(node["data"]["node"]["template"])


# The fold settings


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param({"fold_batch": 0}, "Fold Batch must be at least 1", id="batch-zero"),
        pytest.param({"history_token_budget": -5}, "History Token Budget must be 0", id="budget-negative"),
        pytest.param({"window": -1}, "0 or more", id="window-negative"),
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


SETTLED = [
    ("fold_batch", 0, 1),
    ("fold_batch", -20, 1),
    ("summary_words", 5, 20),
    ("history_token_budget", -5, 0),
    ("history_token_budget", 50, None),
    ("history_token_budget", 300, None),
    ("max_folds_per_turn", 0, 1),
    ("summary_timeout", -1, 0),
    ("n_messages", -3, 0),
]
"""A number the settings refuse, edited on the node, and the value the node keeps (None: the least budget that
holds the summary message and the newest exchange)."""


@pytest.mark.parametrize(("field", "value", "kept"), SETTLED)
async def test_a_refused_number_edited_on_the_node_is_kept_at_the_nearest_accepted_value(field, value, kept):
    component = SummarizingAgentComponent()
    template = template_of(component)
    template[field]["value"] = value

    updated = await component.update_build_config(template, value, field)

    values = {name: updated[name]["value"] for name in (*CHECKED_FIELDS, "pinned_keys")}
    settings = settings_from(values)
    if field == "n_messages":
        assert (updated[field]["value"], settings) == (kept, None)  # 0 turns memory off
    elif kept is None:
        assert settings is not None
        assert updated[field]["value"] == least_history_token_budget(replace(settings, history_token_budget=0))
        assert updated[field]["value"] >= MIN_HISTORY_TOKEN_BUDGET
    else:
        assert settings is not None
        assert updated[field]["value"] == kept


async def test_a_value_that_is_no_number_is_refused_when_edited_naming_the_field():
    component = SummarizingAgentComponent()
    template = template_of(component)

    with pytest.raises(ValueError, match="Fold Batch must be a whole number"):
        await component.update_build_config(template, "many", "fold_batch")


async def test_pinned_keys_typed_on_the_node_are_kept_as_keys_the_turn_accepts():
    component = SummarizingAgentComponent()
    template = template_of(component)
    typed = ["customer name", "clé", "客户", "2fa", "{project}", "clé", "  ", "k" * 70]

    updated = await component.update_build_config(template, typed, "pinned_keys")

    kept = updated["pinned_keys"]["value"]
    assert kept == ["customer_name", "clé", "客户", "_2fa", "project", "", "k" * MAX_PINNED_KEY_CHARS]
    assert pinned_keys_from(kept) == tuple(key for key in kept if key)


async def test_a_new_blank_pinned_key_row_stays_where_it_is_until_something_is_typed_into_it():
    component = SummarizingAgentComponent()
    template = template_of(component)

    updated = await component.update_build_config(template, ["project_id", "", "cluster", ""], "pinned_keys")

    assert updated["pinned_keys"]["value"] == ["project_id", "", "cluster", ""]


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.one_of(st.just(""), st.just("  "), st.text(max_size=12)), max_size=40))
def test_settled_pinned_keys_keep_every_blank_row_and_at_most_the_limit_of_keys(keys: list[str]) -> None:
    kept = settled({"pinned_keys": keys})["pinned_keys"]

    blanks_typed = sum(1 for key in keys if not pinned_key_of(key))
    assert kept.count("") == blanks_typed
    assert len([key for key in kept if key]) <= MAX_PINNED_KEYS
    assert pinned_keys_from(kept) == tuple(dict.fromkeys(key.strip() for key in kept if key))


def test_keys_of_any_script_are_accepted_and_a_refusal_says_the_rule_in_plain_text():
    assert pinned_keys_from(["clé", "客户", "project_id", "_x.y-z"]) == ("clé", "客户", "project_id", "_x.y-z")
    with pytest.raises(ValueError) as refused:
        pinned_keys_from(["a/b"])

    message = str(refused.value)
    assert message.startswith("Pinned Keys: the key “a/b” cannot be used.")
    assert f"at most {MAX_PINNED_KEY_CHARS} characters; at most {MAX_PINNED_KEYS} keys" in message
    # Langflow renders the message as Markdown: nothing in it may turn into emphasis or code.
    assert not any(mark in message.replace("a/b", "") for mark in ("'_'", "*", "`"))


async def test_a_new_node_summarizes_with_ten_messages_and_the_switch_off_is_the_stock_agent():
    component = SummarizingAgentComponent()
    template = template_of(component)
    assert (template["summarize_older_messages"]["value"], template["n_messages"]["value"]) == (True, 10)

    off = await component.update_build_config(template, False, "summarize_older_messages")
    assert off["n_messages"]["value"] == STOCK_N_MESSAGES.value == 100
    on = await component.update_build_config(off, True, "summarize_older_messages")
    assert on["n_messages"]["value"] == 10

    on["n_messages"]["value"] = 30
    assert (await component.update_build_config(on, False, "summarize_older_messages"))["n_messages"]["value"] == 30


@settings(max_examples=300, deadline=None)
@given(
    values=st.fixed_dictionaries(
        {},
        optional={
            **{name: st.integers(-(10**6), 10**6) for name in LEAST},
            "summary_timeout": st.floats(allow_nan=False, allow_infinity=True, min_value=-1e6),
            "pinned_keys": st.lists(st.text(max_size=80), max_size=30),
        },
    )
)
def test_every_settled_value_is_accepted_and_settling_again_changes_nothing(values: dict) -> None:
    fixed = settled(values)

    settings_from(fixed)
    assert settled(fixed) == fixed
    for name, value in values.items():
        if name != "pinned_keys" and fixed[name] != value:
            assert not_run_as_typed({**fixed, name: value}, name, value), (name, value)


def not_run_as_typed(values: dict, name: str, value: object) -> bool:
    """A turn would run with another value than `value` (memory off runs with none)."""
    run = settings_from(values)
    return run is None or getattr(run, name) != value


def test_with_a_provider_that_caches_a_fold_waits_for_twice_fold_batch_and_fold_batch_stays_as_on_the_node():
    from langflow_summarizing_agent.engine.settings import CACHED_FOLD_BATCH_FACTOR, DEFAULT_FOLD_BATCH

    assert settings_from({}).effective_fold_batch == settings_from({}).fold_batch == DEFAULT_FOLD_BATCH
    cached = settings_from({}, prompt_cache=True)
    assert (cached.fold_batch, cached.effective_fold_batch) == (DEFAULT_FOLD_BATCH, 2 * DEFAULT_FOLD_BATCH)
    assert settings_from({"fold_batch": 5}, prompt_cache=True).effective_fold_batch == 5 * CACHED_FOLD_BATCH_FACTOR


def test_the_window_is_the_agents_count_less_its_input_and_the_message_historys_count():
    assert settings_from({"n_messages": 10}).window == 9
    assert settings_from({"n_messages": 10}, counts_the_input=False).window == 10
    assert settings_from({"n_messages": 1}).window == 0
    assert settings_from({"n_messages": 0}) is None
    assert settings_from({"n_messages": 0}, counts_the_input=False) is None


@pytest.mark.parametrize(
    ("values", "settled"),
    [
        ({"summary_words": 10}, ("Summary Word Budget 10 runs as 20",)),
        ({"fold_batch": 0, "max_folds_per_turn": "-2"}, ("Fold Batch 0 runs as 1", "Max Folds per Turn -2 runs as 1")),
        ({"summary_words": "300", "fold_batch": 8}, ()),
    ],
)
def test_a_value_settled_for_the_turn_is_named_with_what_it_runs_as(values, settled):
    assert settings_from(values).settled == settled


def test_a_budget_raised_to_hold_the_summary_message_and_the_newest_exchange_says_so():
    settings = settings_from({"history_token_budget": 300, "summary_words": 300, "pinned_keys": PINNED})
    assert settings.settled == (f"History Token Budget 300 runs as {settings.history_token_budget}",)
    assert settings.history_token_budget > 300


@settings(max_examples=300, deadline=None)
@given(
    values=st.fixed_dictionaries(
        {},
        optional={
            **{name: st.integers(-(10**6), 10**6) for name in LEAST},
            "summary_timeout": st.floats(allow_nan=False, allow_infinity=True, min_value=-1e6),
            "pinned_keys": st.lists(st.text(alphabet=st.characters(codec="utf-8"), max_size=80), max_size=30),
        },
    )
)
def test_a_turn_runs_with_the_values_the_canvas_settles_them_to(values: dict) -> None:
    """A flow uploaded or sent over the run API holds what it holds; a turn runs with what the node shows once the
    canvas has settled it, never refusing what the canvas would keep; only the turn names what it settled."""
    runs, shown = settings_from(values), settings_from(settled(values))
    assert (runs and replace(runs, settled=())) == (shown and replace(shown, settled=()))
    assert shown is None or shown.settled == ()


def test_a_key_uploaded_with_surrounding_spaces_runs_without_them_as_it_always_did():
    run = settings_from({"pinned_keys": [" project_id ", "customer name"]})

    assert run is not None
    assert run.pinned_keys == ("project_id", "customer_name")


@pytest.mark.parametrize("component_class", [SummarizingAgentComponent, SummarizingMessageHistoryComponent])
def test_every_number_field_takes_any_value_typed_digit_by_digit(component_class: type[Component]) -> None:
    """The canvas raises a number below its range's start to it at every keystroke: a range starting above 0 turns
    "50" into "20" after the "5" (Summary Word Budget's least value). The help still names the least value."""
    inputs = {i.name: i for i in component_class.inputs if isinstance(i, IntInput | FloatInput)}

    for name in (*LEAST, "summary_timeout"):
        range_spec = inputs[name].range_spec
        assert range_spec is None or range_spec.min <= 0, name
    assert "at least 20" in (inputs["summary_words"].info or "")
