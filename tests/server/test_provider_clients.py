"""The real provider clients in a real server: the ready flow as exported (the canvas's node ids and types, so Langflow
stores the agent's partial reply before its model call, as it does for every user), with OpenAI's or Anthropic's
model picked in Langflow's own model picker (`ChatOpenAI`, `ChatAnthropic`), sending to the loopback provider servers
the session's server is pointed at (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`). What the provider receives, and the
usage it reports reaching the caching detection: a fold on the agent's prefix runs only once the provider is seen to
cache; every fold after the reply asks on the prefix of the agent's call just before it.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from langflow_summarizing_agent.wiring.prompt_cache import CACHE_CONTROL
from tests.support.flow_files import agent_template, load_support_flow
from tests.support.prompt_caches import anthropic_blocks, openai_blocks, openai_cacheable
from tests.support.provider_servers import COUNTER, FOLD_OPENING, Providers, Recorded
from tests.support.server_chat import ServerChat
from tests.support.server_fixtures import LangflowServer

METADATA = {"model_type": "llm", "tool_calling": True, "model_name_param": "model"}
PICKED = {
    "openai": {"name": "gpt-4o-mini", "provider": "OpenAI", "metadata": {**METADATA, "model_class": "ChatOpenAI"}},
    "anthropic": {
        "name": "claude-sonnet-4-5",
        "provider": "Anthropic",
        "metadata": {**METADATA, "model_class": "ChatAnthropic"},
    },
}
SYSTEM_PROMPT = "You are the support agent of a hosting company. Answer briefly and precisely. " * 90
TURNS = ("My project is PRJ-7.", "please calculate the monthly cost", "And the yearly one?", "Thanks, one more.")


def picked_model_flow(picked: dict[str, Any]) -> dict[str, Any]:
    """The `data` of the ready flow as exported, its model picked in the agent's model picker as a user picks it."""
    flow = load_support_flow()
    settings = {"model": [picked], "api_key": "any-key", "system_prompt": SYSTEM_PROMPT, "n_messages": 3}
    settings |= {"fold_batch": 2, "history_token_budget": 0, "add_current_date_tool": False}
    template = agent_template(flow)
    for name, value in settings.items():
        template[name]["value"] = value
    template["api_key"]["load_from_db"] = False  # a key typed into the field, not a global variable's name
    return flow["data"]


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_the_picked_models_client_sends_the_fold_on_the_agents_prefix_as_the_provider_caches_it(
    langflow_server: LangflowServer, loopback_providers: Providers, wire: str
) -> None:
    server = langflow_server
    chat = ServerChat.create(
        server, server.superuser_token, server.superuser_api_key, data=picked_model_flow(PICKED[wire])
    )
    start, session_id = len(loopback_providers.requests), f"clients-{uuid.uuid4().hex[:8]}"

    replies = [chat.say(session_id, text) for text in TURNS]

    assert all(reply.startswith("Reply ") for reply in replies), replies
    sent = [r for r in loopback_providers.requests[start:] if r.wire == wire]
    at = next(i for i, r in enumerate(sent) if r.is_fold and "tools" in r.body)
    fold, agent_call = sent[at], sent[at - 1]
    assert not agent_call.is_fold
    assert fold.body["tools"] == agent_call.body["tools"]
    assert fold.body["messages"][: len(agent_call.body["messages"])] == agent_call.body["messages"]
    assert _last_text(fold).startswith(FOLD_OPENING)
    assert not fold.body.get("stream") and agent_call.body["stream"]
    if wire == "openai":
        prefix = sum(tokens for _, tokens in openai_blocks(agent_call.body, COUNTER.text))
        assert fold.usage["prompt_tokens_details"]["cached_tokens"] == openai_cacheable(prefix)
        assert agent_call.body["stream_options"] == {"include_usage": True}
    else:
        assert fold.body["system"] == agent_call.body["system"]
        for call in (agent_call, fold):
            assert call.body["cache_control"] == CACHE_CONTROL
            assert call.body["system"][-1]["cache_control"] == call.body["tools"][-1]["cache_control"] == CACHE_CONTROL
        whole = sum(tokens for _, tokens in anthropic_blocks(agent_call.body, COUNTER.text)[0])
        assert fold.usage["cache_read_input_tokens"] == whole


def _last_text(recorded: Recorded) -> str:
    content = recorded.body["messages"][-1]["content"]
    return content if isinstance(content, str) else content[-1]["text"]
