"""The Summarizing Message History on the canvas: the stock Message History's inputs plus the switch, a Summary Model
and the fold settings; Retrieve mode hands the turn to `wiring.history_turn`."""

from typing import Any, cast

from lfx.components.models_and_agents.memory import MemoryComponent
from lfx.inputs.inputs import InputTypes
from lfx.io import SecretStrInput
from lfx.schema.data import Data
from lfx.schema.dataframe import DataFrame
from lfx.schema.dotdict import dotdict
from lfx.schema.message import Message

from langflow_summarizing_agent.engine.settings import (
    CHECKED_FIELDS,
    DEFAULT_N_MESSAGES,
    FIELD_NAMES,
    SUMMARIZING_N_MESSAGES,
)
from langflow_summarizing_agent.wiring import fields, history_turn
from langflow_summarizing_agent.wiring.runner import setting, with_report
from langflow_summarizing_agent.wiring.summary_model import summary_model_picker

SUMMARY_FIELDS = (
    "pinned_keys",
    "summary_model",
    "api_key",
    "fold_batch",
    "summary_words",
    "history_token_budget",
    "max_folds_per_turn",
    "summary_timeout",
)
NO_SENDER_FILTER = {"sender_type": history_turn.ALL_SENDERS, "sender_name": ""}
WORDS = fields.Words(sent="retrieved", run="run", count="Number of Messages", budget_target="retrieved")

STOCK_N_MESSAGES = next(i for i in MemoryComponent.inputs if i.name == "n_messages")
N_MESSAGES_INFO = (
    "Messages retrieved word for word: the newest N, as by the stock Message History. Older messages reach the model "
    f"through the summary before them. {SUMMARIZING_N_MESSAGES} is a good start; switching Summarize Older Messages "
    f"off sets the stock Message History's {DEFAULT_N_MESSAGES} if it is still at {SUMMARIZING_N_MESSAGES}. 0 turns "
    "memory off, summary included."
)
"""Help of Number of Messages while Summarize Older Messages is on."""


def _n_messages_input() -> InputTypes:
    # On the node while the switch is on, so the window a new node retrieves is in sight; refreshed on edit, so a
    # window that makes no sense is refused at once. A new node summarizes with the window the user guide recommends.
    return STOCK_N_MESSAGES.model_copy(
        update={
            "info": N_MESSAGES_INFO,
            "real_time_refresh": True,
            "value": SUMMARIZING_N_MESSAGES,
            "advanced": False,
        }
    )


def _follow_the_switch(build_config: dotdict, enabled: bool) -> None:
    """Number of Messages follows the switch (`fields.follow_the_switch`), and is on the node while it is on, in the
    Parameters panel while it is off, with the stock help."""
    fields.follow_the_switch(build_config, enabled)
    field = build_config.get("n_messages")
    if field is not None:
        field["advanced"] = not enabled
        field["info"] = N_MESSAGES_INFO if enabled else STOCK_N_MESSAGES.info


class SummarizingMessageHistoryComponent(MemoryComponent):
    display_name: str = "Summarizing Message History"
    # "Memory" leads: the sidebar's search finds a word near the start of the description.
    description: str = (
        "Memory that summarizes: a Message History that folds older chat messages into a per-session summary with "
        "pinned key facts, and retrieves the summary followed by the recent messages."
    )
    icon = "message-square-more"
    name = "SummarizingMessageHistory"
    mode_config = {  # noqa: RUF012 - Langflow declares it as a class dict
        "Store": MemoryComponent.mode_config["Store"],
        "Retrieve": [*MemoryComponent.mode_config["Retrieve"], "summarize_older_messages", *SUMMARY_FIELDS],
    }

    inputs = [  # noqa: RUF012 - Langflow declares inputs as a class list
        *(_n_messages_input() if i.name == "n_messages" else i for i in MemoryComponent.inputs),
        fields.summarize_switch(
            on=(
                "messages older than the last Number of Messages are folded into a per-session summary, "
                "retrieved before the recent messages."
            ),
            off="only the last messages, exactly as by the stock Message History.",
        ),
        fields.pinned_keys_input(),
        summary_model_picker(
            name="summary_model",
            display_name=FIELD_NAMES["summary_model"],
            info=(
                "The model that writes the summary; a cheap one will do. Empty: the flow's own language model, the "
                "first one after this Message History, summarizes; with none in the flow nothing is summarized, the "
                "last Number of Messages are retrieved as by the stock Message History, and the status says so. "
                "Built only when a fold runs; if it cannot be built or fails, the fold fails and the run goes on."
            ),
            real_time_refresh=True,
            required=False,
        ),
        SecretStrInput(
            name="api_key",
            display_name=FIELD_NAMES["summary_model_api_key"],
            info="Overrides global provider settings. Leave blank to use your pre-configured API Key.",
            required=False,
            real_time_refresh=True,
            advanced=True,
        ),
        *fields.fold_settings_inputs(WORDS, fold_batch_extra="", budget_extra=""),
    ]

    def _summarizes(self) -> bool:
        return bool(setting(self, "summarize_older_messages"))

    async def _stock_messages(self) -> list[Message]:
        # The stock method is annotated `Data` but returns a list of Messages (it casts the list itself).
        return cast("list[Message]", await super().retrieve_messages())

    async def retrieve_messages(self) -> Data:
        if not self._summarizes():
            return await super().retrieve_messages()
        history = await history_turn.history(self, self._stock_messages)
        return cast("Data", history.messages)

    async def retrieve_messages_as_text(self) -> Message:
        if not self._summarizes():
            return await super().retrieve_messages_as_text()
        history = await history_turn.history(self, self._stock_messages)
        return Message(text=history_turn.as_text(self.template, history))

    async def retrieve_messages_dataframe(self) -> DataFrame:
        return DataFrame(await self.retrieve_messages())

    def extract_data(self, result: object) -> object:
        # Langflow sets a Message output's status to its text; the turn's report goes after it.
        data = super().extract_data(result)
        self.status = with_report(self, self.status)
        return data

    def update_build_config(self, build_config: dotdict, field_value: Any, field_name: str | None = None) -> dotdict:
        build_config = super().update_build_config(build_config, field_value, field_name)
        # Langflow's own refresh would fill an empty Summary Model with the first model listed, the dearest; the
        # Agent's keeps the pick the user made.
        fields.refresh_summary_model_options(self, build_config, field_value, field_name)
        switch = build_config.get("summarize_older_messages") or {}
        enabled = bool(field_value if field_name == "summarize_older_messages" else switch.get("value"))
        retrieving = (build_config.get("mode") or {}).get("value") == "Retrieve"
        if field_name == "summarize_older_messages":
            _follow_the_switch(build_config, enabled)
        if enabled and field_name in (*CHECKED_FIELDS, "pinned_keys", "summarize_older_messages"):
            fields.settle_settings(build_config, field_name, field_value, history_turn.FIELD_NAMES_OF_HISTORY)
        if enabled and field_name in ("memory", "summarize_older_messages"):
            memory = field_value if field_name == "memory" else (build_config.get("memory") or {}).get("value")
            problem = history_turn.refusal({"memory": memory})
            if problem:
                raise ValueError(problem)
        for field in SUMMARY_FIELDS:
            if field in build_config:
                build_config[field]["show"] = retrieving and enabled
        if retrieving and enabled:
            # The summary covers both senders: with the switch on, Retrieve filters no sender, so the filter is kept
            # at no filter and not shown.
            for field, value in NO_SENDER_FILTER.items():
                if field in build_config:
                    build_config[field]["value"] = value
        if "sender_type" in build_config:
            build_config["sender_type"]["show"] = not (retrieving and enabled)
        return build_config
