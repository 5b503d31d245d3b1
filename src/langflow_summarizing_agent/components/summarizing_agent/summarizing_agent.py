"""The Summarizing Agent on the canvas: the stock Agent's inputs plus the switch and the fold settings; every hook
hands the turn to `wiring.agent_turn`."""

from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from lfx.components.models_and_agents.agent import AgentComponent
from lfx.inputs.inputs import InputTypes
from lfx.io import SecretStrInput
from lfx.schema.dotdict import dotdict
from lfx.schema.message import Message

from langflow_summarizing_agent.engine.settings import (
    CHECKED_FIELDS,
    DEFAULT_N_MESSAGES,
    FIELD_NAMES,
    SUMMARIZING_N_MESSAGES,
)
from langflow_summarizing_agent.wiring import agent_turn, fields
from langflow_summarizing_agent.wiring.runner import setting, with_report
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
    "model_input_limit",
)
WORDS = fields.Words(sent="sent", run="turn", count="Number of Chat History Messages", budget_target="per model call")

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
        fields.summarize_switch(
            on=(
                "messages older than the last Number of Chat History Messages are folded into a per-session "
                "summary, sent to the model before the recent messages."
            ),
            off="only the last messages are sent, exactly as by the stock Agent.",
        ),
        fields.pinned_keys_input("Names only; the values are never shown in chat. "),
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
            **fields.SETTING,
        ),
        SecretStrInput(
            name="summary_model_api_key",
            display_name=FIELD_NAMES["summary_model_api_key"],
            info="The Summary Model's key. Leave blank to use the key configured for its provider.",
            required=False,
            advanced=True,
            **fields.SETTING,
        ),
        *fields.fold_settings_inputs(
            WORDS,
            fold_batch_extra=", twice as many when the model's provider caches prompts",
            budget_extra=" (later with a provider that caches prompts)",
        ),
        fields.model_input_limit_input(),
    ]

    async def get_memory_data(self) -> list[Message]:
        # Langflow's own tests build Agents with `__new__` and set only the stock inputs: those run as the stock Agent.
        if not setting(self, "summarize_older_messages"):
            return await super().get_memory_data()
        return await agent_turn.memory_data(self, super().get_memory_data)

    async def message_response(self) -> Message:
        if agent_turn.is_compact_request(self):
            return await agent_turn.compact_reply(self, super().get_memory_data)
        reply = await super().message_response()
        # The final reply: the catch-up after it may start (`wiring.after_reply`).
        agent_turn.reply_built(self, reply)
        return reply

    def _get_shared_callbacks(self) -> list[BaseCallbackHandler]:
        # The turn watches the agent's model calls: the tokens the provider reports, and the prompt a fold reuses.
        return [*super()._get_shared_callbacks(), *agent_turn.usage_callbacks(self)]

    def _build_middleware(self, llm: Any, *, allow_interrupts: bool = True) -> list:
        # With the switch on, the run's calls stay within the model's input limit (`wiring.long_turn`) and an
        # Anthropic model gets cache breakpoints (`wiring.prompt_cache`); the stock Agent has neither.
        middleware = super()._build_middleware(llm, allow_interrupts=allow_interrupts)
        return [*middleware, *agent_turn.long_turn_middleware(self, llm), *agent_turn.cache_middleware(self, llm)]

    async def send_message(self, message: Message, id_: str | None = None, *, skip_db_update: bool = False) -> Message:
        # The reply's first content block is this turn's memory step, shown in the Playground like a tool call.
        message = agent_turn.with_memory_step_in_reply(self, message)
        return await super().send_message(message, id_, skip_db_update=skip_db_update)

    def extract_data(self, result: object) -> object:
        # Langflow sets a Message output's status to its text; the memory report goes after it.
        data = super().extract_data(result)
        self.status = agent_turn.with_long_turn_note(self, with_report(self, self.status))
        return data

    # Same signature as AgentComponent's, which already differs from its sync parent.
    async def update_build_config(  # type: ignore[override]
        self, build_config: dotdict, field_value: Any, field_name: str | None = None
    ) -> dotdict:
        build_config = await super().update_build_config(build_config, field_value, field_name)
        fields.refresh_summary_model_options(self, build_config, field_value, field_name)
        switch = build_config.get("summarize_older_messages", {})
        enabled = bool(field_value if field_name == "summarize_older_messages" else switch.get("value"))
        if field_name == "summarize_older_messages":
            switch["value"] = enabled
            fields.follow_the_switch(build_config, enabled)
        if field_name in (*CHECKED_FIELDS, "pinned_keys", "summarize_older_messages"):
            fields.settle_settings(build_config, field_name, field_value)
        if field_name in ("model_input_limit", "history_token_budget"):
            fields.check_model_input_limit(build_config, field_name, field_value)
        for field in SUMMARY_FIELDS:
            if field in build_config:
                build_config[field]["show"] = enabled
        if "n_messages" in build_config:
            build_config["n_messages"]["info"] = N_MESSAGES_INFO if enabled else STOCK_N_MESSAGES.info
        return build_config
