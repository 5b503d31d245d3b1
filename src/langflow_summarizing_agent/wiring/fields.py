"""What both components show on the canvas, written once: the switch and the fold settings' inputs, their ranges, and
how the node refreshes them (values settled as a turn runs them, the Summary Model picker, the message count that
follows the switch).

The two components differ only in words: the Agent sends messages in a turn, the Message History retrieves them in a
run (`Words`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lfx.field_typing.range_spec import RangeSpec
from lfx.io import BoolInput, FloatInput, IntInput, MessageTextInput

from langflow_summarizing_agent.engine.settings import (
    CHECKED_FIELDS,
    DEFAULT_FOLD_BATCH,
    DEFAULT_HISTORY_TOKEN_BUDGET,
    DEFAULT_MAX_FOLDS_PER_TURN,
    DEFAULT_N_MESSAGES,
    DEFAULT_SUMMARY_TIMEOUT_SECONDS,
    DEFAULT_SUMMARY_WORDS,
    FIELD_NAMES,
    LEAST,
    MAX_MESSAGES_PER_FOLD,
    MIN_HISTORY_TOKEN_BUDGET,
    PINNED_KEY_RULE,
    SUMMARIZING_N_MESSAGES,
    settings_from,
    settled,
    whole_number,
)
from langflow_summarizing_agent.wiring import long_turn
from langflow_summarizing_agent.wiring.summary_model import picks_the_agents_own_model

SETTING = {"override_skip": True, "api_editable": True}
"""override_skip: Langflow leaves out the value of a hidden field when it builds a flow; the fold settings keep
theirs, so an API tweak or a scripted flow takes effect whether or not the switch shows them."""
MAX_WHOLE_NUMBER = 1_000_000
"""The top of a whole-number fold setting's range on the canvas."""


@dataclass(frozen=True)
class Words:
    """How a component's help names what it does with messages."""

    sent: str
    """"sent" (to the model) or "retrieved"."""
    run: str
    """"turn" or "run"."""
    count: str
    """Its message count as the UI shows it."""
    budget_target: str
    """What the History Token Budget bounds."""


def summarize_switch(on: str, off: str) -> BoolInput:
    return BoolInput(
        name="summarize_older_messages",
        display_name=FIELD_NAMES["summarize_older_messages"],
        info=f"On: {on} Off: {off}",
        value=True,
        real_time_refresh=True,
        api_editable=True,
    )


def pinned_keys_input(extra: str = "") -> MessageTextInput:
    return MessageTextInput(
        name="pinned_keys",
        display_name=FIELD_NAMES["pinned_keys"],
        info=(
            "Facts the summary always keeps, by name, for example project_id, customer. Their latest values "
            f"open the summary however long ago they were said. {extra}{PINNED_KEY_RULE} A key typed otherwise is "
            "changed to follow the rule."
        ),
        is_list=True,
        real_time_refresh=True,
        **SETTING,
    )


def fold_settings_inputs(words: Words, *, fold_batch_extra: str, budget_extra: str) -> list[Any]:
    """Fold Batch, Summary Word Budget, History Token Budget, Max Folds per Turn and Summary Timeout (s)."""
    return [
        _whole_number(
            "fold_batch",
            DEFAULT_FOLD_BATCH,
            f"Messages older than the {words.count} that build up (still {words.sent} word for word) before one "
            f"summary call folds them{fold_batch_extra}. Smaller: fewer tokens per model call, more summary calls.",
        ),
        _whole_number(
            "summary_words",
            DEFAULT_SUMMARY_WORDS,
            f"Longest summary, in words (at least {LEAST['summary_words']}); a longer one is clipped.",
        ),
        _whole_number(
            "history_token_budget",
            DEFAULT_HISTORY_TOKEN_BUDGET,
            f"Most tokens of history {words.budget_target}: the summary, its pinned facts and the recent messages. "
            f"Past 80% of it{budget_extra}, older messages are folded early; if the last {words.count} alone do not "
            f"fit, only the newest that fit are {words.sent}. 0 turns the budget off; otherwise at least "
            f"{MIN_HISTORY_TOKEN_BUDGET}, and a budget too small for the summary message and the newest exchange is "
            "raised to the least that holds them.",
        ),
        _whole_number(
            "max_folds_per_turn",
            DEFAULT_MAX_FOLDS_PER_TURN,
            f"Most summary calls in one {words.run}, each folding up to {MAX_MESSAGES_PER_FOLD} messages. A long "
            f"session switched on catches up over several {words.run}s instead of stalling one.",
        ),
        FloatInput(
            name="summary_timeout",
            range_spec=RangeSpec(min=0, max=3_600, step=1),
            display_name=FIELD_NAMES["summary_timeout"],
            info=(
                f"Seconds to wait for one summary call; a slower one is abandoned and the {words.run} uses the "
                f"previous summary. 0 uses {DEFAULT_SUMMARY_TIMEOUT_SECONDS:g}."
            ),
            value=DEFAULT_SUMMARY_TIMEOUT_SECONDS,
            advanced=True,
            real_time_refresh=True,
            **SETTING,
        ),
    ]


def model_input_limit_input() -> IntInput:
    """The Summarizing Agent's Model Input Limit: what one model call of a run may carry (`wiring.long_turn`)."""
    return IntInput(
        name="model_input_limit",
        range_spec=RangeSpec(min=0, max=MAX_WHOLE_NUMBER, step=1, step_type="int"),
        display_name=FIELD_NAMES["model_input_limit"],
        info=(
            "Most tokens the model takes in one call. 0 takes it from the model's profile when it has one. Past 75% "
            "of it in one call, the turn's earlier tool results are cleared (the newest stay); a call the provider "
            "still refuses for its length is retried once with less."
        ),
        value=0,
        advanced=True,
        real_time_refresh=True,
        **SETTING,
    )


def check_model_input_limit(build_config: Mapping[str, Any], field_name: str | None, field_value: Any) -> None:
    """Refuse, naming the fields, a Model Input Limit that is no whole number or below the History Token Budget."""
    values = {
        name: (build_config.get(name) or {}).get("value") for name in ("model_input_limit", "history_token_budget")
    }
    if field_name in values:
        values[field_name] = field_value
    limit = long_turn.model_input_limit(values["model_input_limit"])
    budget = whole_number(values["history_token_budget"], "history_token_budget") or 0
    long_turn.check_budget(budget, limit or None, FIELD_NAMES["model_input_limit"])


def _whole_number(name: str, value: int, info: str) -> IntInput:
    """A whole-number fold setting: in the Parameters panel, refreshed on edit (`settle_settings`), kept when hidden."""
    return IntInput(
        name=name,
        range_spec=at_least(name),
        display_name=FIELD_NAMES[name],
        info=info,
        value=value,
        advanced=True,
        real_time_refresh=True,
        **SETTING,
    )


def at_least(name: str) -> RangeSpec:
    """The range of a whole-number fold setting on the canvas. It starts at 0, not at the least value the setting
    takes (`settings.LEAST`, which its help names): the canvas raises a number below the range's start to it at
    every keystroke, so "50" typed into a field whose least value is 20 would become "20" after the "5". The server
    settles the number to its least value once typing stops (`settle_settings`)."""
    if name not in LEAST:
        raise KeyError(name)
    return RangeSpec(min=0, max=MAX_WHOLE_NUMBER, step=1, step_type="int")


def follow_the_switch(build_config: Mapping[str, Any], enabled: bool) -> None:
    """The message count at its default follows the switch: the recommended window on, the stock component's default
    off, so the switch off is the stock component. A number the user set stays."""
    field = build_config.get("n_messages")
    if field is None:
        return
    old, new = (DEFAULT_N_MESSAGES, SUMMARIZING_N_MESSAGES) if enabled else (SUMMARIZING_N_MESSAGES, DEFAULT_N_MESSAGES)
    if field.get("value") == old:
        field["value"] = new


def settle_settings(
    build_config: Mapping[str, Any], field_name: str | None, field_value: Any, names: Mapping[str, str] = FIELD_NAMES
) -> None:
    """Keep the edited settings at the nearest values the settings accept (`settings.settled`), in `build_config`,
    so the canvas shows and saves only what a turn accepts; raises ValueError, naming the field, for a value that is
    not a number at all. With the switch off, the message count is the stock component's, left as it is."""
    switch = (build_config.get("summarize_older_messages") or {}).get("value")
    names_checked = [name for name in (*CHECKED_FIELDS, "pinned_keys") if name in build_config]
    if not switch:
        names_checked = [name for name in names_checked if name != "n_messages"]
    values = {name: build_config[name].get("value") for name in names_checked}
    if field_name in values:
        values[field_name] = field_value
    fixed = settled(values)
    for name in names_checked:
        build_config[name]["value"] = fixed[name]
    settings_from(fixed, names=names)


def refresh_summary_model_options(
    component: Any, build_config: dict[str, Any], field_value: Any, field_name: str | None
) -> None:
    """The Summary Model picker's options, fetched as the Agent's own picker fetches its own. A pick stays what the
    user made it: Langflow fills an empty model picker with a default, but an empty Summary Model means the Agent's
    own model summarizes. Picking the Agent's own model there goes back to none (`picks_the_agents_own_model`)."""
    from lfx.base.models.unified_models import get_language_model_options, update_model_options_in_build_config

    if "summary_model" not in build_config:
        return
    picked = build_config["summary_model"].get("value")
    update_model_options_in_build_config(
        component=component,
        build_config=build_config,
        cache_key_prefix="language_model_options",
        get_options_func=get_language_model_options,
        field_name=field_name,
        field_value=field_value,
        model_field_name="summary_model",
    )
    if field_name != "summary_model":
        build_config["summary_model"]["value"] = picked
    elif picks_the_agents_own_model(field_value, (build_config.get("model") or {}).get("value")):
        build_config["summary_model"]["value"] = []
