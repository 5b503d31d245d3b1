"""Tokens are counted as the model counts them: the model's tokenizer, loaded offline, and the estimate only as the
last resort. The History Token Budget then holds in real tokens whatever the text: prose, logs or Chinese."""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Iterator, MutableMapping

import pytest

from langflow_summarizing_agent.engine.fold import SaveFailures
from langflow_summarizing_agent.engine.settings import FoldSettings
from langflow_summarizing_agent.engine.tokens import (
    CUT_MARKER,
    ESTIMATE,
    MESSAGE_FRAMING,
    SCALE_STEP,
    TokenCounter,
    counter_for,
    load_encoding,
)
from langflow_summarizing_agent.engine.turn import fold_if_due
from tests.support.fakes import InMemoryStore, RecordingSummarizer

BUDGET = 7_000


def real_tokens(text: str) -> int:
    """A chat message in o200k tokens, counted here independently of the package."""
    encoding = load_encoding("o200k_base")
    assert encoding is not None, "the o200k encoding ships with the package"
    return len(encoding.encode_ordinary(text)) + MESSAGE_FRAMING


def log_text(seed: int, tokens: int) -> str:
    rng = random.Random(seed)
    lines: list[str] = []
    while real_tokens("\n".join(lines)) < tokens:
        lines.append(
            f"2026-03-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
            f"{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z level=error req={rng.getrandbits(64):016x} "
            f"node=ip-10-{rng.randint(0, 255)}-{rng.randint(0, 255)} latency_ms={rng.randint(1, 9999)} "
            f"code=E{rng.randint(100, 999)}"
        )
    return "\n".join(lines)


CHINESE = "我们的集群在欧洲区域，昨天升级以后数据库连接池经常耗尽，请帮忙查看日志并给出排查步骤。"  # noqa: RUF001 - Chinese punctuation


def chinese_text(seed: int, tokens: int) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    while real_tokens("".join(parts)) < tokens:
        start = rng.randrange(len(CHINESE) - 10)
        parts.append(CHINESE[start:] + CHINESE[:start])
    return "".join(parts)


def prose_text(seed: int, tokens: int) -> str:
    rng = random.Random(seed)
    words = [
        "the",
        "connection",
        "pool",
        "on",
        "the",
        "eu",
        "cluster",
        "runs",
        "out",
        "after",
        "the",
        "upgrade",
        "so",
        "we",
        "restart",
        "workers",
    ]
    text: list[str] = []
    while real_tokens(" ".join(text)) < tokens:
        text.append(rng.choice(words))
    return " ".join(text)


def test_the_models_tokenizer_loads_without_the_network(monkeypatch):
    load_encoding.cache_clear()

    def no_network(*args, **kwargs):
        raise AssertionError("the tokenizer tried the network")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    assert counter_for("gpt-4o-mini").encoding == "o200k_base"
    assert counter_for("gpt-3.5-turbo").encoding == "cl100k_base"
    # A model tiktoken does not know is counted in o200k and corrected by the provider's reported usage.
    assert counter_for("claude-sonnet-4-5").encoding == "o200k_base"
    assert counter_for(None).encoding == "o200k_base"
    assert counter_for("gpt-4o-mini").text("hello world") == 2 + MESSAGE_FRAMING


class WatchedEnviron(MutableMapping[str, str]):
    """`os.environ`, recording every change made through it."""

    def __init__(self, environ: MutableMapping[str, str]) -> None:
        self.environ = environ
        self.changes: list[str] = []

    def __getitem__(self, key: str) -> str:
        return self.environ[key]

    def __setitem__(self, key: str, value: str) -> None:
        self.changes.append(f"set {key}")
        self.environ[key] = value

    def __delitem__(self, key: str) -> None:
        self.changes.append(f"deleted {key}")
        del self.environ[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.environ)

    def __len__(self) -> int:
        return len(self.environ)


def test_loading_a_tokenizer_leaves_the_environment_unchanged(monkeypatch):
    load_encoding.cache_clear()
    watched = WatchedEnviron(os.environ)
    with monkeypatch.context() as patched:
        patched.setattr(os, "environ", watched)
        counter = counter_for("gpt-4o-mini")
    assert counter.encoding == "o200k_base"
    assert watched.changes == []


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_an_encoding_is_built_as_tiktoken_builds_it(monkeypatch, name):
    from tiktoken_ext import openai_public

    ours = load_encoding(name)
    assert ours is not None
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: ours._mergeable_ranks)
    theirs = getattr(openai_public, name)()
    assert (ours.name, ours._pat_str, ours._special_tokens) == (
        theirs["name"],
        theirs["pat_str"],
        theirs["special_tokens"],
    )


def test_without_an_offline_copy_the_estimate_is_the_last_resort(monkeypatch, tmp_path):
    import langflow_summarizing_agent.engine.tokens as tokens

    load_encoding.cache_clear()
    monkeypatch.setattr(tokens.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tokens.tempfile, "gettempdir", lambda: str(tmp_path))
    try:
        counter = counter_for("gpt-4o-mini")
        assert counter.encoding is None
        assert counter.text("x" * 400) == ESTIMATE.text("x" * 400)
    finally:
        load_encoding.cache_clear()


def test_a_scale_corrects_every_count():
    counter = counter_for("gpt-4o-mini")
    assert counter.scaled(1.5).text(CHINESE) == -(-counter.text(CHINESE) * 3 // 2)
    assert "provider-reported" in counter.scaled(1.5).name


async def _history_tokens_of_every_turn(make_text, counter: TokenCounter) -> list[tuple[int, int | None]]:
    """A 60-exchange session of ~300-token messages, a 5,000-token paste at exchange 10. For each turn: its history
    in real tokens, and, when the stock window did not go whole, the real tokens of the newest message left out."""
    settings = FoldSettings(window=9, history_token_budget=BUDGET, counter=counter)
    store = InMemoryStore()
    summarizer = RecordingSummarizer()
    seen = []
    for exchange in range(60):
        size = 5_000 if exchange == 10 else 300
        store.add(make_text(2 * exchange, size))
        turn = await fold_if_due(store, summarizer, settings, failures=SaveFailures())
        sent = {m.id for m in turn.plan.send}
        summary = real_tokens(turn.plan.summary_text) if turn.plan.summary_text else 0
        window = store.messages_stored[-settings.window :]
        left_out = [m for m in window if m.id not in sent]
        seen.append(
            (
                sum(real_tokens(m.text) for m in turn.plan.send) + summary,
                real_tokens(left_out[-1].text) if left_out else None,
            )
        )
        store.add(make_text(2 * exchange + 1, 300))
    return seen


@pytest.mark.parametrize("make_text", [log_text, chinese_text, prose_text], ids=["logs", "chinese", "prose"])
async def test_the_history_budget_holds_in_real_tokens(make_text):
    seen = await _history_tokens_of_every_turn(make_text, counter_for("gpt-4o-mini"))
    assert max(tokens for tokens, _ in seen) <= BUDGET
    cut = [(tokens, left_out) for tokens, left_out in seen if left_out is not None]
    assert cut, "the paste should leave window messages out on some turns"
    # A window message is left out only when it would not fit, and a window of ~300-token messages fills the
    # budget to within 10%.
    assert all(tokens + left_out > BUDGET for tokens, left_out in cut), cut
    assert all(tokens >= 0.9 * BUDGET for tokens, left_out in cut if left_out <= 0.1 * BUDGET), cut


@pytest.mark.parametrize("make_text", [log_text, chinese_text], ids=["logs", "chinese"])
async def test_the_estimate_alone_breaks_the_budget_on_logs_and_chinese(make_text):
    seen = await _history_tokens_of_every_turn(make_text, ESTIMATE)
    assert max(tokens for tokens, _ in seen) > BUDGET


async def test_the_estimate_alone_leaves_out_prose_that_fits():
    seen = await _history_tokens_of_every_turn(prose_text, ESTIMATE)
    assert any(tokens + left_out <= BUDGET for tokens, left_out in seen if left_out is not None)


def test_the_steady_counter_counts_at_least_as_much_and_the_same_across_a_step():
    counter = counter_for("gpt-4o-mini")
    steady = {scale: counter.scaled(scale).steady() for scale in (0.97, 1.0, 1.02, 1.04, 1.15, 1.24)}

    assert all(steady[scale].text(CHINESE) >= counter.scaled(scale).text(CHINESE) for scale in steady)
    assert steady[0.97] == steady[1.0] == steady[1.02] == steady[1.04], "1.0 sits mid-step"
    assert steady[1.15] == steady[1.24] != steady[1.0]
    assert steady[1.0].scale == pytest.approx(SCALE_STEP**0.5)


@pytest.mark.parametrize("make_text", [log_text, chinese_text], ids=["logs", "chinese"])
async def test_a_message_cut_to_fit_is_cut_at_the_same_point_on_every_turn_that_sends_it(make_text):
    """The issue's session: History Token Budget 3000, a log larger than the budget pasted, then short exchanges,
    with the provider's scale drifting a little each turn. The log goes cut, at one point, within the budget."""
    budget = 3_000
    store = InMemoryStore()
    summarizer = RecordingSummarizer()
    cuts, history = [], []
    for exchange in range(8):
        counter = counter_for("gpt-4o-mini").scaled(1.0 + exchange / 200)
        settings = FoldSettings(window=9, history_token_budget=budget, counter=counter)
        store.add(make_text(2 * exchange, 6_000 if exchange == 1 else 220))
        store.add(make_text(2 * exchange + 1, 220))
        turn = await fold_if_due(store, summarizer, settings, failures=SaveFailures())
        cuts += [m.text for m in turn.plan.send if m.text.endswith(CUT_MARKER)]
        history.append(sum(counter.message(m) for m in turn.plan.send) + counter.text(turn.plan.summary_text or ""))

    assert len(cuts) >= 4, "the log goes cut on the turns after it"
    assert len(set(cuts)) == 1, [len(cut) for cut in cuts]
    assert max(history) <= budget
