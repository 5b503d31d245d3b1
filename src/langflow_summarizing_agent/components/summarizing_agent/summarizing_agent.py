from lfx.components.models_and_agents.agent import AgentComponent
from lfx.io import BoolInput, MessageTextInput


class SummarizingAgentComponent(AgentComponent):
    display_name: str = "Summarizing Agent"
    description: str = "An Agent that summarizes older chat messages per session and keeps pinned key facts."
    name = "SummarizingAgent"

    inputs = [
        *AgentComponent.inputs,
        BoolInput(
            name="summarize_older_messages",
            display_name="Summarize Older Messages",
            info="Fold messages that leave the history window into a per-session summary.",
            value=False,
            advanced=True,
            real_time_refresh=True,
        ),
        MessageTextInput(
            name="pinned_keys",
            display_name="Pinned Keys",
            info="Key names whose latest values are kept verbatim beside the summary, for example project_id.",
            is_list=True,
            advanced=True,
            show=False,
        ),
    ]
