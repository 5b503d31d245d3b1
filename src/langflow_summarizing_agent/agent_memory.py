"""The names that component code saved in flows by version 0.1.0 imports (`from langflow_summarizing_agent import
agent_memory`). A saved flow carries its component's source and Langflow runs that source, so these names stay
until such flows are updated on the canvas. New code imports `wiring.agent_turn`, `wiring.fields` and
`engine.settings`."""

from langflow_summarizing_agent.components.summarizing_agent.summarizing_agent import N_MESSAGES_INFO
from langflow_summarizing_agent.engine.settings import CHECKED_FIELDS as CHECKED_SETTINGS
from langflow_summarizing_agent.engine.settings import DEFAULT_SUMMARY_TIMEOUT_SECONDS
from langflow_summarizing_agent.engine.settings import FIELD_NAMES as SETTING_NAMES
from langflow_summarizing_agent.wiring.agent_turn import compact_reply, is_compact_request, with_memory_step
from langflow_summarizing_agent.wiring.agent_turn import memory_data as summarized_memory_data
from langflow_summarizing_agent.wiring.fields import settle_settings as check_settings
from langflow_summarizing_agent.wiring.runner import setting, with_report

__all__ = [
    "CHECKED_SETTINGS",
    "DEFAULT_SUMMARY_TIMEOUT_SECONDS",
    "N_MESSAGES_INFO",
    "SETTING_NAMES",
    "check_settings",
    "compact_reply",
    "is_compact_request",
    "setting",
    "summarized_memory_data",
    "with_memory_step",
    "with_report",
]
