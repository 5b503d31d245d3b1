"""The fold settings: each default written once, each check made once, in `FoldSettings`.

`settings_from()` turns the values of a component's inputs (or of the flow's saved template, while they are edited)
into `FoldSettings`, each at the nearest value the settings accept (`settled`), as the canvas shows it: a turn runs
with what the node shows, whether the flow was typed on the canvas, uploaded or sent by the run API. Every refusal (a
value that is no number at all) names the field as the UI shows it (`FIELD_NAMES`) and says what to change.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from langflow_summarizing_agent.engine.prompt import summary_message_reserve
from langflow_summarizing_agent.engine.tokens import ESTIMATE, TokenCounter

DEFAULT_N_MESSAGES = 100
"""Langflow's own default of Number of Chat History Messages."""
SUMMARIZING_N_MESSAGES = 10
"""Number of Chat History Messages of a new Summarizing Agent: the window the user guide recommends (6 to 20)."""
DEFAULT_FOLD_BATCH = 8
"""Unfolded messages older than the window that trigger a fold. At 8, a chat folds once every 4 exchanges, and the
messages waiting for that fold (0 to 6, sent word for word) add about 3 messages per call on average."""
CACHED_FOLD_BATCH_FACTOR = 2
"""With a provider that caches prompts, a fold waits for this many times Fold Batch messages. A message waiting for
a fold then costs a cache hit (10-50% of its price) on each call, while every fold rewrites the summary message, so
the agent's next call misses its whole history: fewer, larger folds cost less (docs/benchmarks.md, the bill)."""
DEFAULT_SUMMARY_WORDS = 300
DEFAULT_HISTORY_TOKEN_BUDGET = 7_000
"""Tokens of history (summary message included) per model call; 0 turns the budget off. Sized for the ready flow:
the summary (~450 tokens at 300 words) + a window of 9 messages + the 6 messages waiting for a fold, at ~300 tokens
each, stay under the fold trigger (80%), so the window never shrinks and folds run by batch, not by budget."""
DEFAULT_BUDGET_TRIGGER_SHARE = 0.8
"""Share of the budget that, once passed by the summary and the unfolded history, folds early (LibreChat's
compaction threshold). With a provider that caches prompts the fold waits longer, while one more exchange like the
newest fits in the budget (`plan._budget_trigger`)."""
BUDGET_TARGET_SHARE = 0.5
"""With a provider that caches prompts, a fold due by the budget runs early only when it brings the summary and the
unfolded history to this share of the budget or below; otherwise it waits until an unfolded message would be left
out. Each fold makes the agent's next call miss its history in the cache, so a fold that frees little (a big message
in the window, which no fold may take) costs more than it saves, and would run again a few exchanges later."""
DEFAULT_MAX_FOLDS_PER_TURN = 3
"""Folds (summary calls) one catch-up may make: in the turn, or after the reply."""
DEFAULT_SUMMARY_TIMEOUT_SECONDS = 60.0
MAX_MESSAGES_PER_FOLD = 60
"""Messages sent to the summary model in one call."""
MAX_MESSAGE_CHARS = 4_000
"""Each message is cut to this many characters in a fold."""
MIN_CUT_TOKENS = 100
"""A message cut to fewer tokens than this is not worth sending, except as part of the newest exchange."""
MAX_PINNED_KEYS = 20
MAX_PINNED_KEY_CHARS = 64
PINNED_KEY_PATTERN = re.compile(rf"^[^\W\d][\w.\-]{{0,{MAX_PINNED_KEY_CHARS - 1}}}$")
"""A pinned key: a letter (of any script) or an underscore, then letters, digits, underscores, dots or hyphens."""
PINNED_KEY_RULE = (
    f"Each key starts with a letter (any script) or an underscore and holds only letters, digits, underscores, dots "
    f"and hyphens, at most {MAX_PINNED_KEY_CHARS} characters; at most {MAX_PINNED_KEYS} keys."
)
"""The rule in words, for the tooltip and the error (plain text: the UI renders messages as Markdown)."""
MIN_HISTORY_TOKEN_BUDGET = 200
LEAST = {"n_messages": 0, "fold_batch": 1, "summary_words": 20, "history_token_budget": 0, "max_folds_per_turn": 1}
"""The least value of each whole-number setting: a smaller one is settled to it (`settled`)."""

FIELD_NAMES = {
    "n_messages": "Number of Chat History Messages",
    "summarize_older_messages": "Summarize Older Messages",
    "pinned_keys": "Pinned Keys",
    "summary_model": "Summary Model",
    "summary_model_api_key": "Summary Model API Key",
    "fold_batch": "Fold Batch",
    "summary_words": "Summary Word Budget",
    "history_token_budget": "History Token Budget",
    "max_folds_per_turn": "Max Folds per Turn",
    "summary_timeout": "Summary Timeout (s)",
    "model_input_limit": "Model Input Limit",
}
"""Each input's name as the UI shows it; refusals use these."""
WHOLE_NUMBER_FIELDS = ("n_messages", "fold_batch", "summary_words", "history_token_budget", "max_folds_per_turn")
CHECKED_FIELDS = (*WHOLE_NUMBER_FIELDS, "summary_timeout")
"""Numeric settings checked when edited in the UI."""


@dataclass(frozen=True)
class FoldSettings:
    window: int = DEFAULT_N_MESSAGES - 1
    """Messages before the input sent word for word, as by the stock component at the same setting: the Agent's
    Number of Chat History Messages counts the input, the Message History's Number of Messages does not."""
    pinned_keys: tuple[str, ...] = ()
    fold_batch: int = DEFAULT_FOLD_BATCH
    """Fold Batch as on the node; a fold waits for `effective_fold_batch`."""
    summary_words: int = DEFAULT_SUMMARY_WORDS
    history_token_budget: int = DEFAULT_HISTORY_TOKEN_BUDGET
    budget_trigger_share: float = DEFAULT_BUDGET_TRIGGER_SHARE
    max_folds_per_turn: int = DEFAULT_MAX_FOLDS_PER_TURN
    max_messages_per_fold: int = MAX_MESSAGES_PER_FOLD
    max_message_chars: int = MAX_MESSAGE_CHARS
    summary_model: str | None = None
    summary_timeout: float = DEFAULT_SUMMARY_TIMEOUT_SECONDS
    counter: TokenCounter = field(default=ESTIMATE)
    """How tokens are counted: the model's tokenizer, scaled by the provider's reported usage
    (`engine.tokens`)."""
    prompt_cache: bool = False
    """The agent's provider caches prompts: a fold waits for `CACHED_FOLD_BATCH_FACTOR` times Fold Batch
    (`effective_fold_batch`) and an early budget fold must reach `BUDGET_TARGET_SHARE`."""
    settled: tuple[str, ...] = ()
    """The values a turn runs at other than the node's, in words (`settings_from`): "Summary Word Budget 10 runs as
    20"."""

    def __post_init__(self) -> None:
        problems = []
        if self.window < 0:
            problems.append(f"The window must be 0 or more messages, got {self.window}.")
        if self.fold_batch < 1:
            problems.append(f"{FIELD_NAMES['fold_batch']} must be at least 1 message.")
        if self.summary_words < 20:
            problems.append(f"{FIELD_NAMES['summary_words']} must be at least 20 words.")
        if self.history_token_budget < 0:
            problems.append(f"{FIELD_NAMES['history_token_budget']} must be 0 (off) or a positive number of tokens.")
        if 0 < self.history_token_budget < MIN_HISTORY_TOKEN_BUDGET:
            problems.append(
                f"{FIELD_NAMES['history_token_budget']} must be 0 (off) or at least {MIN_HISTORY_TOKEN_BUDGET} "
                f"tokens, got {self.history_token_budget}."
            )
        if not 0 < self.budget_trigger_share <= 1:
            problems.append("The budget trigger share must be above 0 and at most 1.")
        if self.max_folds_per_turn < 1:
            problems.append(f"{FIELD_NAMES['max_folds_per_turn']} must be at least 1.")
        if self.summary_timeout <= 0 or not math.isfinite(self.summary_timeout):
            problems.append(
                f"{FIELD_NAMES['summary_timeout']} must be a positive number of seconds; "
                f"0 uses the default ({DEFAULT_SUMMARY_TIMEOUT_SECONDS:g})."
            )
        if not problems and 0 < self.history_token_budget < self.summary_reserve + self.newest_exchange_tokens:
            needed = self.summary_reserve + self.newest_exchange_tokens
            problems.append(
                f"{FIELD_NAMES['history_token_budget']} ({self.history_token_budget} tokens) cannot hold the summary "
                f"message (up to ~{self.summary_reserve} tokens for a {FIELD_NAMES['summary_words']} of "
                f"{self.summary_words} words and {len(self.pinned_keys)} pinned values) and the newest exchange. "
                f"Raise {FIELD_NAMES['history_token_budget']} to at least {needed}, or lower "
                f"{FIELD_NAMES['summary_words']} or the number of {FIELD_NAMES['pinned_keys']}."
            )
        if problems:
            raise ValueError(" ".join(problems))

    @property
    def effective_fold_batch(self) -> int:
        """Unfolded messages older than the window that start a fold: Fold Batch, `CACHED_FOLD_BATCH_FACTOR` times
        it when the provider caches prompts."""
        return self.fold_batch * (CACHED_FOLD_BATCH_FACTOR if self.prompt_cache else 1)

    @property
    def read_limit(self) -> int:
        """Messages one turn reads: the window, up to two batches waiting for a fold, and one more to see past them."""
        return self.window + 1 + 2 * self.effective_fold_batch

    @property
    def catch_up_messages(self) -> int:
        """Most messages one catch-up folds."""
        return self.max_folds_per_turn * self.max_messages_per_fold

    @property
    def summary_reserve(self) -> int:
        """Most tokens the summary message takes."""
        return summary_message_reserve(self.pinned_keys, self.summary_words, self.counter)

    @property
    def cut_tokens(self) -> int:
        """Most tokens a message cut to fit the budget keeps, counted at the scale's step (`TokenCounter.steady`):
        half of what the budget leaves after the summary message, so both messages of the newest exchange fit cut."""
        reserve = summary_message_reserve(self.pinned_keys, self.summary_words, self.counter.steady())
        return max(MIN_CUT_TOKENS, (self.history_token_budget - reserve) // 2)

    @property
    def newest_exchange_tokens(self) -> int:
        """Room the newest exchange always keeps in the budget: two messages, cut if they must be."""
        return 2 * MIN_CUT_TOKENS if self.window else 0


def settings_from(
    values: Mapping[str, Any],
    *,
    summary_model: str | None = None,
    counter: TokenCounter = ESTIMATE,
    prompt_cache: bool = False,
    names: Mapping[str, str] = FIELD_NAMES,
    counts_the_input: bool = True,
) -> FoldSettings | None:
    """`FoldSettings` from input values by input name, each at the nearest value the settings accept, as the canvas
    keeps it (`settled`; a missing or empty value takes its default), each value settled so named in
    `FoldSettings.settled`; None when the message count is 0, which turns memory off. Raises ValueError naming the
    field to change for a value that is no number.

    `counter` counts tokens as the agent's model does; `prompt_cache` says its provider caches prompts. `names` are
    the fields as the component shows them, for a component whose message count has another name (the Message
    History's Number of Messages), and `counts_the_input` whether that count takes the input's place (the Agent's)."""
    given_values = values
    values = settled(values)
    numbers = {name: whole_number(values.get(name), name, names) for name in WHOLE_NUMBER_FIELDS}
    n_messages = DEFAULT_N_MESSAGES if numbers["n_messages"] is None else numbers["n_messages"]
    given = {name: number for name, number in numbers.items() if number is not None and name != "n_messages"}
    budget = given.pop("history_token_budget", DEFAULT_HISTORY_TOKEN_BUDGET)
    unbudgeted = FoldSettings(
        window=max(n_messages - 1, 0) if counts_the_input else n_messages,
        fold_batch=given.get("fold_batch", DEFAULT_FOLD_BATCH),
        summary_words=given.get("summary_words", DEFAULT_SUMMARY_WORDS),
        max_folds_per_turn=given.get("max_folds_per_turn", DEFAULT_MAX_FOLDS_PER_TURN),
        pinned_keys=pinned_keys_from(values.get("pinned_keys")),
        summary_timeout=summary_timeout_from(values.get("summary_timeout")),
        summary_model=summary_model,
        counter=counter,
        prompt_cache=prompt_cache,
        history_token_budget=0,
    )
    if budget >= MIN_HISTORY_TOKEN_BUDGET:
        # The canvas keeps a budget that holds the summary message and the newest exchange as it counted them
        # (`settled`); counted with the model's tokenizer, scaled by what the provider reported, they may take a
        # little more, and the budget grows to hold them rather than fail the turn.
        budget = max(budget, least_history_token_budget(unbudgeted))
    runs_at = {**values, "history_token_budget": budget}
    notes = tuple(
        f"{names[name]} {given_values[name]} runs as {runs_at[name]}"
        for name in (*WHOLE_NUMBER_FIELDS, "summary_timeout")
        if _number_or_none(given_values.get(name), float) not in (None, _number_or_none(runs_at.get(name), float))
    )
    settings = replace(unbudgeted, history_token_budget=budget, settled=notes)
    return settings if n_messages else None


def least_history_token_budget(settings: FoldSettings) -> int:
    """The least History Token Budget that holds the summary message and the newest exchange at `settings`."""
    return max(MIN_HISTORY_TOKEN_BUDGET, settings.summary_reserve + settings.newest_exchange_tokens)


def whole_number(value: Any, name: str, names: Mapping[str, str] = FIELD_NAMES) -> int | None:
    """A whole-number input's value; None when it is empty."""
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        msg = f"{names[name]} must be a whole number, got {value!r}."
        raise ValueError(msg) from None


def summary_timeout_from(value: Any) -> float:
    """Summary Timeout (s) from its input; 0 or empty is the default. `FoldSettings` checks the range."""
    try:
        timeout = float(value) if value not in (None, "") else 0.0
    except (TypeError, ValueError):
        msg = f"{FIELD_NAMES['summary_timeout']} must be a number of seconds, got {value!r}."
        raise ValueError(msg) from None
    return timeout or DEFAULT_SUMMARY_TIMEOUT_SECONDS


def pinned_keys_from(raw: Any) -> tuple[str, ...]:
    """Pinned key names from the input: blanks dropped, duplicates merged, anything else refused clearly."""
    if raw is None or raw == "":
        return ()
    items = [raw] if isinstance(raw, str) else list(raw)
    keys: list[str] = []
    for item in items:
        key = str(getattr(item, "text", item)).strip()
        if not key or key in keys:
            continue
        if not PINNED_KEY_PATTERN.match(key):
            msg = f"{FIELD_NAMES['pinned_keys']}: the key “{key[:80]}” cannot be used. {PINNED_KEY_RULE}"
            raise ValueError(msg)
        keys.append(key)
    if len(keys) > MAX_PINNED_KEYS:
        msg = f"{FIELD_NAMES['pinned_keys']}: {len(keys)} keys given. {PINNED_KEY_RULE}"
        raise ValueError(msg)
    return tuple(keys)


def pinned_key_of(text: str) -> str:
    """The key `text` means, made to follow the rule: leading spaces go, other spaces become underscores, other
    characters a key cannot hold are dropped, a key starting with a digit gets an underscore first, and it is cut to
    the longest key; "" when nothing is left. Spaces at the end stay as one space, which a turn strips
    (`pinned_keys_from`): the canvas settles a key while it is typed, and "customer " goes on to "customer name"."""
    body = text.strip()
    key = re.sub(r"[^\w.\-]", "", re.sub(r"\s+", "_", body))
    if key and not re.match(r"[^\W\d]", key):
        key = "_" + key
    key = key[:MAX_PINNED_KEY_CHARS] if PINNED_KEY_PATTERN.match(key[:MAX_PINNED_KEY_CHARS]) else ""
    return f"{key} " if key and text != text.rstrip() else key


def settled(values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` as the canvas keeps them: each setting at the nearest value the settings accept, so a value the
    settings would refuse is never saved. Numbers below their least value take it; a History Token Budget too small
    to hold the summary message and the newest exchange takes the least that holds them; pinned keys follow the
    rule (`settled_pinned_keys`). A value that is not a number is left for `settings_from` to refuse."""
    fixed = dict(values)
    if "pinned_keys" in fixed and fixed["pinned_keys"] not in (None, ""):
        fixed["pinned_keys"] = settled_pinned_keys(fixed["pinned_keys"])
    for name, least in LEAST.items():
        number = _number_or_none(fixed.get(name))
        if number is not None and number < least:
            fixed[name] = least
    timeout = _number_or_none(fixed.get("summary_timeout"), float)
    if timeout is not None and (timeout < 0 or not math.isfinite(timeout)):
        fixed["summary_timeout"] = 0
    budget = _number_or_none(fixed.get("history_token_budget"))
    if budget:
        fixed["history_token_budget"] = max(budget, _least_budget(fixed))
    return fixed


def settled_pinned_keys(raw: Any) -> list[str]:
    """Pinned Keys as the canvas keeps them: each key made to follow the rule (`pinned_key_of`), repeats dropped,
    the first `MAX_PINNED_KEYS` keys kept. A blank row stays where it is: the canvas settles the field a moment after
    "+" adds a row, before anything is typed into it; a turn ignores blanks (`pinned_keys_from`)."""
    items = [raw] if isinstance(raw, str) else list(raw)
    kept: list[str] = []
    for item in items:
        key = pinned_key_of(str(getattr(item, "text", item)))
        if not key:
            kept.append("")
        elif key not in kept and sum(1 for k in kept if k) < MAX_PINNED_KEYS:
            kept.append(key)
    return kept


def _least_budget(values: Mapping[str, Any]) -> int:
    """The least History Token Budget that holds the summary message and the newest exchange at `values`, counted
    with the estimate the canvas has (no model tokenizer yet)."""
    try:
        probe = settings_from({**values, "history_token_budget": 0})
    except ValueError:
        return MIN_HISTORY_TOKEN_BUDGET
    return least_history_token_budget(probe) if probe is not None else MIN_HISTORY_TOKEN_BUDGET


def _number_or_none(value: Any, kind: type = int) -> Any:
    try:
        return None if value is None or value == "" else kind(value)
    except (TypeError, ValueError, OverflowError):
        return None
