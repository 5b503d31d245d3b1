"""The scripted support session: deterministic texts of about 300 tokens a message, one pasted log, tool turns.

Only the first message states the project (PRJ-123) and the cluster (EU); nothing later repeats them, so the facts
reach the model in the last exchange only through memory. Every stored text of a session is unique (checked when
it is built), so the benchmark tells which stored message a model call received by its text alone.

Scenarios on the same shape: longer messages (`message_tokens`), and `/compact` sent as the user message half way
(`compact=True`), which the Summarizing Agent answers itself.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from langchain_core.messages import HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from langflow_summarizing_agent.engine.plan import COMPACT_COMMAND

MESSAGE_TOKENS = 300
LONG_MESSAGE_TOKENS = 1_500
"""Message size of the long-message scenario."""
LOG_WORDS = 5_000
FINAL_QUESTION = "Which cluster were we on again?"
FIRST_FACTS = (
    "Hi, I need help with project PRJ-123. Everything below runs on the EU cluster, "
    "and the checkout service stopped deploying this morning."
)
TOOL_TURN_EVERY = 6
"""Every 6th exchange (3, 9, 15, ...) the model calls the calculator first; alternately once and twice."""

SERVICES = ("checkout", "payments", "inventory", "search", "notifications", "billing", "gateway", "auth")
COMPONENTS = (
    "ingress controller",
    "service mesh sidecar",
    "node autoscaler",
    "config map",
    "secret store",
    "load balancer",
    "message queue",
    "connection pool",
    "DNS resolver",
    "image registry",
)
PHASES = ("image pull", "init container", "readiness probe", "migration job", "rollout", "health check")
SETTINGS = ("max_connections", "timeout_seconds", "replica count", "memory limit", "pool size", "retry budget")
COMMANDS = (
    "kubectl describe pod",
    "kubectl get events --sort-by=.lastTimestamp",
    "helm history",
    "kubectl top pods",
    "kubectl logs --previous",
    "kubectl rollout status",
)

USER_SENTENCES = (
    "The {service} deployment still fails at the {phase} phase with error E{code}.",
    "I ran `{command}` and it printed a warning about the {component} that I do not understand.",
    "Restarting the {service} pods did not help; the {phase} times out after {n} seconds.",
    "Our {component} returns HTTP {status} for the {service} endpoint while the health check answers fine.",
    "The {component} logs show a connection reset roughly every {n} seconds.",
    "We changed the {setting} of {service} from {a} to {b} yesterday, which might be related.",
    "Memory of the {service} container climbs to {mib} MiB before it is killed.",
    "Could the {component} version matter? We upgraded it last week.",
    "The staging environment works with the same manifests, only production shows this.",
    "I also see {n} pending pods for {service}, and the events mention the {component}.",
)
REPLY_SENTENCES = (
    "Check the {component} first: a stale entry there explains error E{code} at the {phase} phase.",
    "Run `{command}` again and look at the last {n} events for the {service} pods.",
    "Set the {setting} of {service} back to {a} and watch whether the {phase} passes.",
    "HTTP {status} from the {component} usually means the upstream is not ready yet, not that it is down.",
    "A memory limit of {mib} MiB is tight for {service}; raise it by a quarter and compare.",
    "If staging works with the same manifests, diff the secrets and the {component} settings between the two.",
    "Pending pods point at capacity: the {component} may not scale up fast enough for {n} replicas.",
    "Roll back only {service}, keep the others, and see whether error E{code} follows the rollback.",
    "Keep the previous logs of the failing pod; they show why the {phase} gave up.",
    "Once this passes, lower the retry budget again so failures surface quickly.",
)
LOG_LINE = (
    "09:{minute:02d}:{second:02d} {level} {service} pod {pod} on node {node}: {event} after {latency} ms "
    "(attempt {attempt} of 5)"
)
LOG_EVENTS = (
    "connection reset by peer",
    "readiness probe failed",
    "upstream request timeout",
    "pool exhausted waiting for connection",
    "retrying request",
    "TLS handshake timeout",
    "liveness probe succeeded",
    "config reloaded",
)


@dataclass(frozen=True)
class Exchange:
    index: int
    user_text: str
    reply: str
    """The scripted answer; for the `/compact` exchange empty: the agent writes its own reply there."""
    tool_calls: int = 0
    expression: str = "2*2"
    compact: bool = False
    """The user sends `/compact`; no agent model call, and the exchange is no part of the conversation."""

    def message_number(self, role: str) -> int:
        """Where this exchange's user message (`role` "user") or reply sits among the stored messages."""
        return 2 * self.index + (0 if role == "user" else 1)


def support_session(exchanges: int, *, message_tokens: int = MESSAGE_TOKENS, compact: bool = False) -> list[Exchange]:
    """The first message, then `exchanges` more; the log is pasted a third of the way in, the last one asks
    for the cluster. Tool turns: every `TOOL_TURN_EVERY`-th exchange from the 3rd. With `compact`, the user
    sends `/compact` at `compact_exchange(exchanges)` instead of that exchange's message."""
    if exchanges < 2:
        msg = "the support session needs at least 2 exchanges after the first message"
        raise ValueError(msg)
    log_at = log_exchange(exchanges)
    compact_at = compact_exchange(exchanges) if compact else None
    if compact_at is not None and compact_at in (log_at, exchanges):
        msg = "the /compact scenario needs at least 4 exchanges after the first message"
        raise ValueError(msg)
    first = Exchange(
        0,
        _message(FIRST_FACTS, USER_SENTENCES, seed=0, tokens=message_tokens),
        _message("Thanks.", REPLY_SENTENCES, seed=1, tokens=message_tokens),
    )
    session = [first]
    for index in range(1, exchanges + 1):
        if index == compact_at:
            session.append(Exchange(index, COMPACT_COMMAND, "", compact=True))
            continue
        reply = filler_message(2 * index + 1, message_tokens)
        if index == exchanges:
            user_text = FINAL_QUESTION
        elif index == log_at:
            user_text = "Here is the log of the failing rollout:\n" + pasted_log()
        else:
            user_text = filler_message(2 * index, message_tokens)
        tool_calls = 0
        if index % TOOL_TURN_EVERY == 3 and index != exchanges:
            tool_calls = 1 if index % (2 * TOOL_TURN_EVERY) == 3 else 2
        expression = f"{index * 37}*{index + 12}/4"
        session.append(Exchange(index, user_text, reply, tool_calls, expression))
    _check_unique(session)
    return session


def _check_unique(session: list[Exchange]) -> None:
    texts = [text for e in session if not e.compact for text in (e.user_text, e.reply)]
    if len(set(texts)) != len(texts):
        msg = "the scripted session repeats a message text; the benchmark identifies stored messages by text"
        raise ValueError(msg)


def log_exchange(exchanges: int) -> int:
    """The exchange that pastes the log: a third of the way in."""
    return max(1, round(exchanges / 3))


def compact_exchange(exchanges: int) -> int:
    """The exchange that sends `/compact` in the compact scenario: half way (30 of 60)."""
    return max(1, round(exchanges / 2))


def switch_exchange(exchanges: int) -> int:
    """The exchange from which the switched-on scenario runs with the switch on: three quarters in (45 of 60)."""
    return max(1, round(exchanges * 3 / 4))


def filler_message(index: int, tokens: int = MESSAGE_TOKENS) -> str:
    """A troubleshooting message of about `tokens` tokens: from the user for even `index`, else a reply."""
    if index % 2 == 0:
        return _message(f"Step {index // 2}:", USER_SENTENCES, seed=index, tokens=tokens)
    return _message(f"For step {index // 2}:", REPLY_SENTENCES, seed=index, tokens=tokens)


def _message(opening: str, sentences: tuple[str, ...], seed: int, tokens: int = MESSAGE_TOKENS) -> str:
    rng = random.Random(seed)
    parts = [opening]
    while count_tokens_approximately([HumanMessage(content=" ".join(parts))]) < tokens - 20:
        parts.append(rng.choice(sentences).format(**_slots(rng)))
    return " ".join(parts)


def _slots(rng: random.Random) -> dict[str, object]:
    return {
        "service": rng.choice(SERVICES),
        "component": rng.choice(COMPONENTS),
        "phase": rng.choice(PHASES),
        "setting": rng.choice(SETTINGS),
        "command": rng.choice(COMMANDS),
        "code": rng.randint(100, 999),
        "n": rng.randint(3, 90),
        "status": rng.choice((502, 503, 504)),
        "a": rng.randint(2, 64),
        "b": rng.randint(65, 256),
        "mib": rng.choice((256, 384, 512, 768)),
    }


def pasted_log() -> str:
    """About `LOG_WORDS` words of rollout log."""
    rng = random.Random(5_000)
    lines: list[str] = []
    words = 0
    while words < LOG_WORDS:
        line = LOG_LINE.format(
            minute=len(lines) // 60 % 60,
            second=len(lines) % 60,
            level=rng.choice(("INFO", "WARN", "ERROR")),
            service=rng.choice(SERVICES),
            pod=f"{rng.getrandbits(24):06x}",
            node=rng.randint(1, 40),
            event=rng.choice(LOG_EVENTS),
            latency=rng.randint(1, 30_000),
            attempt=rng.randint(1, 5),
        )
        lines.append(line)
        words += len(line.split())
    return "\n".join(lines)
