from lfx.components.models_and_agents.agent import AgentComponent
from lfx.io import BoolInput, FloatInput, HandleInput, IntInput, MessageTextInput
from lfx.schema.dotdict import dotdict
from lfx.schema.message import Message

from langflow_summarizing_agent import agent_memory
from langflow_summarizing_agent.fold import (
    DEFAULT_FOLD_BATCH,
    DEFAULT_HISTORY_TOKEN_BUDGET,
    DEFAULT_MAX_FOLDS_PER_TURN,
    DEFAULT_SUMMARY_WORDS,
)

SUMMARY_FIELDS = (
    "pinned_keys",
    "summary_model",
    "fold_batch",
    "summary_words",
    "history_token_budget",
    "max_folds_per_turn",
    "summary_timeout",
)


class SummarizingAgentComponent(AgentComponent):
    display_name: str = "Summarizing Agent"
    description: str = (
        "An Agent that folds older chat messages into a per-session summary with pinned key facts, "
        "and sends only recent messages verbatim."
    )
    icon = "bot"
    name = "SummarizingAgent"

    inputs = [  # noqa: RUF012 - Langflow declares inputs as a class list
        *AgentComponent.inputs,
        BoolInput(
            name="summarize_older_messages",
            display_name="Summarize Older Messages",
            info=(
                "Off: the last N messages are sent as by the stock Agent. On: older messages are folded into a "
                "per-session summary sent as one message before the recent ones."
            ),
            value=False,
            advanced=True,
            real_time_refresh=True,
        ),
        MessageTextInput(
            name="pinned_keys",
            display_name="Pinned Keys",
            info="Facts the summary always keeps, by key name, for example project_id, customer.",
            is_list=True,
            advanced=True,
            show=False,
        ),
        HandleInput(
            name="summary_model",
            display_name="Summary Model",
            info="Optional cheaper model for the summary; the Agent's model is used when nothing is connected.",
            input_types=["LanguageModel"],
            required=False,
            advanced=True,
            show=False,
        ),
        IntInput(
            name="fold_batch",
            display_name="Fold Batch",
            info="Older messages that build up before they are folded into the summary.",
            value=DEFAULT_FOLD_BATCH,
            advanced=True,
            show=False,
        ),
        IntInput(
            name="summary_words",
            display_name="Summary Word Budget",
            info="Longest summary, in words.",
            value=DEFAULT_SUMMARY_WORDS,
            advanced=True,
            show=False,
        ),
        IntInput(
            name="history_token_budget",
            display_name="History Token Budget",
            info="Most tokens of history (summary included) per model call; older messages fold early. 0 turns it off.",
            value=DEFAULT_HISTORY_TOKEN_BUDGET,
            advanced=True,
            show=False,
        ),
        IntInput(
            name="max_folds_per_turn",
            display_name="Max Folds per Turn",
            info="Most summary calls in one turn while catching up on a long session.",
            value=DEFAULT_MAX_FOLDS_PER_TURN,
            advanced=True,
            show=False,
        ),
        FloatInput(
            name="summary_timeout",
            display_name="Summary Timeout (s)",
            info="A summary call that takes longer is abandoned; the turn runs with the previous summary.",
            value=agent_memory.DEFAULT_SUMMARY_TIMEOUT_SECONDS,
            advanced=True,
            show=False,
        ),
    ]

    async def get_memory_data(self):
        # getattr: Langflow's own tests build Agents with `__new__` and set only the stock inputs.
        if not getattr(self, "summarize_older_messages", False):
            return await super().get_memory_data()
        return await agent_memory.summarized_memory_data(self, super().get_memory_data)

    async def message_response(self) -> Message:
        if agent_memory.is_compact_request(self):
            return await agent_memory.compact_reply(self, super().get_memory_data)
        return await super().message_response()

    def extract_data(self, result):
        # Langflow sets a Message output's status to its text; the memory report goes after it.
        data = super().extract_data(result)
        self.status = agent_memory.with_report(self, self.status)
        return data

    # Same signature as AgentComponent's, which already differs from its sync parent.
    async def update_build_config(  # type: ignore[override]
        self, build_config: dotdict, field_value, field_name: str | None = None
    ) -> dotdict:
        build_config = await super().update_build_config(build_config, field_value, field_name)
        switch = build_config.get("summarize_older_messages", {})
        enabled = bool(field_value if field_name == "summarize_older_messages" else switch.get("value"))
        for field in SUMMARY_FIELDS:
            if field in build_config:
                build_config[field]["show"] = enabled
        return build_config
