"""The Summarizing Agent on the canvas: the stock Agent's inputs plus the switch and the fold settings; every hook
hands the turn to `wiring.agent_turn`."""

from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from lfx.components.models_and_agents.agent import AgentComponent
from lfx.field_typing.range_spec import RangeSpec
from lfx.inputs.inputs import InputTypes
from lfx.io import BoolInput, FloatInput, IntInput, MessageTextInput, SecretStrInput
from lfx.schema.dotdict import dotdict
from lfx.schema.message import Message

from langflow_summarizing_agent.engine.settings import (
    CHECKED_FIELDS,
    DEFAULT_FOLD_BATCH,
    DEFAULT_HISTORY_TOKEN_BUDGET,
    DEFAULT_MAX_FOLDS_PER_TURN,
    DEFAULT_N_MESSAGES,
    DEFAULT_SUMMARY_TIMEOUT_SECONDS,
    DEFAULT_SUMMARY_WORDS,
    FIELD_NAMES,
    MAX_MESSAGES_PER_FOLD,
    MIN_HISTORY_TOKEN_BUDGET,
    PINNED_KEY_RULE,
    SUMMARIZING_N_MESSAGES,
)
from langflow_summarizing_agent.wiring import agent_turn
from langflow_summarizing_agent.wiring.summary_model import summary_model_picker

SUMMARY_FIELDS = (
    "pinned_keys",
    "summary_model",
    "summary_model_api_key",
    "fold_batch",
    "summary_words",
    "history_token_budget",
    "max_folds_per_turn",
    "summary_timeout",
)
# override_skip: Langflow leaves out the value of a hidden field when it builds a flow; these settings keep theirs,
# so an API tweak or a scripted flow takes effect whether or not the switch shows them.
SETTING = {"override_skip": True, "api_editable": True}


STOCK_N_MESSAGES = next(i for i in AgentComponent.inputs if i.name == "n_messages")
N_MESSAGES_INFO = (
    "Messages sent word for word: the newest N - 1 messages before the input (the input takes one slot), and the "
    "older ones waiting for the next fold (up to Fold Batch, twice that when the provider caches prompts). Older "
    f"messages reach the model through the summary. {SUMMARIZING_N_MESSAGES} is a good start; switching Summarize "
    f"Older Messages off sets the stock Agent's {DEFAULT_N_MESSAGES} if it is still at {SUMMARIZING_N_MESSAGES}. 0 "
    "turns memory off, summary included."
)
"""Help of Number of Chat History Messages while Summarize Older Messages is on."""


def _n_messages_input() -> InputTypes:
    # Refreshed on edit, so a window that makes no sense is refused at once; its help follows the switch. A new node
    # summarizes with the recent window the user guide recommends.
    return STOCK_N_MESSAGES.model_copy(
        update={"real_time_refresh": True, "info": N_MESSAGES_INFO, "value": SUMMARIZING_N_MESSAGES}
    )


def _follow_the_switch(build_config: dotdict, enabled: bool) -> None:
    """Number of Chat History Messages at its default follows the switch: the recommended window on, the stock
    Agent's default off, so the switch off is the stock Agent. A number the user set stays."""
    field = build_config.get("n_messages")
    if field is None:
        return
    old, new = (DEFAULT_N_MESSAGES, SUMMARIZING_N_MESSAGES) if enabled else (SUMMARIZING_N_MESSAGES, DEFAULT_N_MESSAGES)
    if field.get("value") == old:
        field["value"] = new


class SummarizingAgentComponent(AgentComponent):
    display_name: str = "Summarizing Agent"
    # "Memory" leads: the sidebar's search finds a word near the start of the description.
    description: str = (
        "Memory that summarizes: an Agent that folds older chat messages into a per-session summary with pinned key "
        "facts, and sends only recent messages verbatim."
    )
    icon = "bot"
    name = "SummarizingAgent"

    inputs = [  # noqa: RUF012 - Langflow declares inputs as a class list
        *(_n_messages_input() if i.name == "n_messages" else i for i in AgentComponent.inputs),
        BoolInput(
            name="summarize_older_messages",
            display_name=FIELD_NAMES["summarize_older_messages"],
            info=(
                "On: messages older than the last Number of Chat History Messages are folded into a per-session "
                "summary, sent to the model before the recent messages. Off: only the last messages are sent, "
                "exactly as by the stock Agent."
            ),
            value=True,
            real_time_refresh=True,
            api_editable=True,
        ),
        MessageTextInput(
            name="pinned_keys",
            display_name=FIELD_NAMES["pinned_keys"],
            info=(
                "Facts the summary always keeps, by name, for example project_id, customer. Their latest values "
                "open the summary however long ago they were said. Names only; the values are never shown in chat. "
                f"{PINNED_KEY_RULE} A key typed otherwise is changed to follow the rule."
            ),
            is_list=True,
            real_time_refresh=True,
            **SETTING,
        ),
        summary_model_picker(
            name="summary_model",
            display_name=FIELD_NAMES["summary_model"],
            info=(
                "Optional cheaper model for the summary calls, built only when a fold runs; if it cannot be built or "
                "fails, the fold fails and the turn goes on. None picked: the Agent's own model summarizes; picking "
                "the Agent's own model here goes back to none."
            ),
            real_time_refresh=True,
            required=False,
            advanced=True,
            **SETTING,
        ),
        SecretStrInput(
            name="summary_model_api_key",
            display_name=FIELD_NAMES["summary_model_api_key"],
            info="The Summary Model's key. Leave blank to use the key configured for its provider.",
            required=False,
            advanced=True,
            **SETTING,
        ),
        IntInput(
            name="fold_batch",
            range_spec=agent_turn.at_least("fold_batch"),
            display_name=FIELD_NAMES["fold_batch"],
            info=(
                "Messages older than the Number of Chat History Messages that build up (still sent word for word) "
                "before one summary call folds them, twice as many when the model's provider caches prompts. "
                "Smaller: fewer tokens per model call, more summary calls."
            ),
            value=DEFAULT_FOLD_BATCH,
            advanced=True,
            real_time_refresh=True,
            **SETTING,
        ),
        IntInput(
            name="summary_words",
            range_spec=agent_turn.at_least("summary_words"),
            display_name=FIELD_NAMES["summary_words"],
            info="Longest summary, in words (at least 20); a longer one is clipped.",
            value=DEFAULT_SUMMARY_WORDS,
            advanced=True,
            real_time_refresh=True,
            **SETTING,
        ),
        IntInput(
            name="history_token_budget",
            range_spec=agent_turn.at_least("history_token_budget"),
            display_name=FIELD_NAMES["history_token_budget"],
            info=(
                "Most tokens of history per model call: the summary, its pinned facts and the recent messages. Past "
                "80% of it (later with a provider that caches prompts), older messages are folded early; if the last "
                "Number of Chat History Messages alone do not fit, only the newest that fit are sent, and the memory "
                "step says so. 0 turns the budget off; "
                f"otherwise at least {MIN_HISTORY_TOKEN_BUDGET}, and a budget too small for the summary message and "
                "the newest exchange is raised to the least that holds them."
            ),
            value=DEFAULT_HISTORY_TOKEN_BUDGET,
            advanced=True,
            real_time_refresh=True,
            **SETTING,
        ),
        IntInput(
            name="max_folds_per_turn",
            range_spec=agent_turn.at_least("max_folds_per_turn"),
            display_name=FIELD_NAMES["max_folds_per_turn"],
            info=(
                f"Most summary calls in one turn, each folding up to {MAX_MESSAGES_PER_FOLD} messages. A long session "
                "switched on catches up over several turns instead of stalling one."
            ),
            value=DEFAULT_MAX_FOLDS_PER_TURN,
            advanced=True,
            real_time_refresh=True,
            **SETTING,
        ),
        FloatInput(
            name="summary_timeout",
            range_spec=RangeSpec(min=0, max=3_600, step=1),
            display_name=FIELD_NAMES["summary_timeout"],
            info=(
                "Seconds to wait for one summary call; a slower one is abandoned and the turn uses the previous "
                f"summary. 0 uses {DEFAULT_SUMMARY_TIMEOUT_SECONDS:g}."
            ),
            value=DEFAULT_SUMMARY_TIMEOUT_SECONDS,
            advanced=True,
            real_time_refresh=True,
            **SETTING,
        ),
    ]

    async def get_memory_data(self) -> list[Message]:
        # Langflow's own tests build Agents with `__new__` and set only the stock inputs: those run as the stock Agent.
        if not agent_turn.setting(self, "summarize_older_messages"):
            return await super().get_memory_data()
        return await agent_turn.memory_data(self, super().get_memory_data)

    async def message_response(self) -> Message:
        if agent_turn.is_compact_request(self):
            return await agent_turn.compact_reply(self, super().get_memory_data)
        reply = await super().message_response()
        # The final reply: the fold after it may start (`wiring.after_reply`).
        agent_turn.reply_built(self, reply)
        return reply

    def _get_shared_callbacks(self) -> list[BaseCallbackHandler]:
        # The turn watches the agent's model calls: the tokens the provider reports, and the prompt a fold reuses.
        return [*super()._get_shared_callbacks(), *agent_turn.usage_callbacks(self)]

    def _build_middleware(self, llm: Any, *, allow_interrupts: bool = True) -> list:
        # With the switch on, an Anthropic model gets cache breakpoints (`wiring.prompt_cache`); the stock Agent none.
        middleware = super()._build_middleware(llm, allow_interrupts=allow_interrupts)
        return [*middleware, *agent_turn.cache_middleware(self, llm)]

    def _build_initial_agent_message(self) -> Message:
        # The reply's first content block is this turn's memory step, shown in the Playground like a tool call.
        return agent_turn.with_memory_step(self, super()._build_initial_agent_message())

    def extract_data(self, result: object) -> object:
        # Langflow sets a Message output's status to its text; the memory report goes after it.
        data = super().extract_data(result)
        self.status = agent_turn.with_report(self, self.status)
        return data

    # Same signature as AgentComponent's, which already differs from its sync parent.
    async def update_build_config(  # type: ignore[override]
        self, build_config: dotdict, field_value: Any, field_name: str | None = None
    ) -> dotdict:
        build_config = await super().update_build_config(build_config, field_value, field_name)
        agent_turn.refresh_summary_model_options(self, build_config, field_value, field_name)
        switch = build_config.get("summarize_older_messages", {})
        enabled = bool(field_value if field_name == "summarize_older_messages" else switch.get("value"))
        if field_name == "summarize_older_messages":
            switch["value"] = enabled
            _follow_the_switch(build_config, enabled)
        if field_name in (*CHECKED_FIELDS, "pinned_keys", "summarize_older_messages"):
            agent_turn.settle_settings(build_config, field_name, field_value)
        for field in SUMMARY_FIELDS:
            if field in build_config:
                build_config[field]["show"] = enabled
        if "n_messages" in build_config:
            build_config["n_messages"]["info"] = N_MESSAGES_INFO if enabled else STOCK_N_MESSAGES.info
        return build_config
