"""What LangChain's real clients say of a fold answer cut off at the length limit: `ChatOpenAI` and `ChatAnthropic`,
streaming or not, over HTTP to the loopback provider servers (`tests.support.provider_servers`), which cut a fold
off when its conversation holds `CUT_OFF_MARKER`. The summarizer refuses that answer before its JSON is read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_openai import ChatOpenAI

from langflow_summarizing_agent.engine.prompt import FoldAnswerCutOff, build_fold_prompt
from langflow_summarizing_agent.engine.records import Summary
from langflow_summarizing_agent.wiring.summary_model import summarizer_for
from tests.support.fakes import make_messages
from tests.support.provider_servers import CUT_OFF_MARKER, FOLD_ANSWER, Providers, running_providers

CUT_OFF_REASONS = {"openai": 'finish_reason "length"', "anthropic": 'stop_reason "max_tokens"'}
"""How each wire's client reports an answer cut off at the length limit."""


def client(wire: str, providers: Providers, streaming: bool) -> ChatOpenAI | ChatAnthropic:
    if wire == "openai":
        url = providers.openai_base_url
        return ChatOpenAI(model="gpt-4o-mini", api_key="any", base_url=url, streaming=streaming)
    url = providers.anthropic_base_url
    return ChatAnthropic(model="claude-sonnet-4-5", api_key="any", base_url=url, streaming=streaming)


@pytest.fixture(scope="module")
def providers() -> Iterator[Providers]:
    with running_providers() as running:
        yield running


def fold_of(text: str) -> list[Any]:
    return build_fold_prompt(Summary(), make_messages([text]), pinned_keys=(), summary_words=50, max_message_chars=99)


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
@pytest.mark.parametrize("wire", list(CUT_OFF_REASONS))
async def test_a_fold_answer_the_provider_cut_off_is_refused_and_a_whole_one_is_the_summary(
    providers: Providers, wire: str, streaming: bool
) -> None:
    summarize = summarizer_for(lambda: client(wire, providers, streaming), 10)

    with pytest.raises(FoldAnswerCutOff, match=f"cut off at its length limit \\({CUT_OFF_REASONS[wire]}\\)"):
        await summarize(fold_of(f"a long log {CUT_OFF_MARKER}"))
    assert await summarize(fold_of("a short note")) == FOLD_ANSWER
