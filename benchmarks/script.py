"""The scripted support session: a first message with two facts, then troubleshooting at about 300 tokens a message,
one pasted log, tool turns, and a last question only the first message answers.

Only the first message states the project (PRJ-123) and the cluster (EU). Every stored text is unique (checked), so
the benchmark model tells which stored message a call received by its text. Variants: longer messages
(`message_tokens`), `/compact` half way (`compact`), and two whose text the 4-characters estimate misjudges
(`language`): `LOGS`, a short log in every other user message, and `CHINESE`. Messages are sized in the engine's
tokens (`benchmarks.billing.COUNTER`).
"""

# The Chinese texts use Chinese (full-width) punctuation on purpose.
# ruff: noqa: RUF001

from __future__ import annotations

import random
from dataclasses import dataclass

from benchmarks.billing import COUNTER
from langflow_summarizing_agent.engine.plan import COMPACT_COMMAND

MESSAGE_TOKENS, LONG_MESSAGE_TOKENS, LOG_WORDS = 300, 1_500, 5_000
FINAL_QUESTION = "Which cluster were we on again?"
FIRST_FACTS = (
    "Hi, I need help with project PRJ-123. Everything below runs on the EU cluster, "
    "and the checkout service stopped deploying this morning."
)
ENGLISH, LOGS, CHINESE = "english", "logs", "chinese"
FINAL_QUESTION_ZH = "我们之前用的是哪个集群来着？"
FIRST_FACTS_ZH = (
    "你好，我需要项目 PRJ-123 的帮助。下面的所有服务都运行在 EU 集群上，今天早上 checkout 服务突然无法部署了。"
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
COMPONENTS_ZH = [
    "入口控制器",
    "服务网格边车",
    "节点自动扩缩容",
    "配置映射",
    "密钥存储",
    "负载均衡器",
    "消息队列",
    "连接池",
    "DNS 解析器",
    "镜像仓库",
]
PHASES_ZH = ("镜像拉取", "初始化容器", "就绪探针", "迁移任务", "滚动发布", "健康检查")
SETTINGS_ZH = ("max_connections", "timeout_seconds", "副本数", "内存上限", "连接池大小", "重试预算")
USER_SENTENCES_ZH = (
    "{service} 的部署在{phase}阶段仍然失败，报错 E{code}。",
    "我执行了 `{command}`，它输出了一条关于{component}的警告，我看不懂。",
    "重启 {service} 的 Pod 没有用，{phase}在 {n} 秒后超时。",
    "我们的{component}对 {service} 接口返回 HTTP {status}，但健康检查是正常的。",
    "{component}的日志显示大约每 {n} 秒就有一次连接被重置。",
    "昨天我们把 {service} 的{setting}从 {a} 改成了 {b}，可能和这个有关。",
    "{service} 容器的内存涨到 {mib} MiB 之后就被杀掉了。",
    "{component}的版本会有影响吗？我们上周刚升级过。",
    "预发环境用同样的清单是正常的，只有生产环境出现这个问题。",
    "我还看到 {service} 有 {n} 个 Pod 处于 Pending 状态，事件里提到了{component}。",
)
REPLY_SENTENCES_ZH = (
    "先检查{component}：那里有一条过期的记录，就能解释{phase}阶段的 E{code} 错误。",
    "再执行一次 `{command}`，看看 {service} 的 Pod 最近的 {n} 条事件。",
    "把 {service} 的{setting}改回 {a}，观察{phase}能不能通过。",
    "{component}返回 HTTP {status} 通常说明上游还没有就绪，而不是已经宕机。",
    "对 {service} 来说，{mib} MiB 的内存上限偏紧；先调高四分之一再对比。",
    "如果预发环境用同样的清单能正常运行，就比较一下两边的密钥和{component}的配置。",
    "Pending 的 Pod 说明容量不够：{component}可能来不及扩容到 {n} 个副本。",
    "只回滚 {service}，其他服务保持不变，看看 E{code} 错误会不会随着回滚消失。",
    "保留失败 Pod 之前的日志，它们能说明{phase}为什么放弃了。",
    "这个问题解决之后，把重试预算再调低，让故障能尽快暴露出来。",
)
SHORT_LOG_LINE = (
    "2026-03-14T09:{minute:02d}:{second:02d}.{millis:03d}Z level={level} svc={service} "
    "pod={service}-{replica}-{suffix} node=ip-10-0-{subnet}-{host} trace_id={trace} req_id={request} "
    'msg="{event}" latency_ms={latency} attempt={attempt}'
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
    """The scripted answer; empty for `/compact`, which the agent answers itself without a model call."""
    tool_calls: int = 0
    expression: str = "2*2"
    compact: bool = False


def support_session(
    exchanges: int, *, message_tokens: int = MESSAGE_TOKENS, compact: bool = False, language: str = ENGLISH
) -> list[Exchange]:
    """The first message, then `exchanges` more: the log pasted a third of the way in, tool turns every
    `TOOL_TURN_EVERY`-th exchange from the 3rd, the last asks for the cluster. `compact`: `/compact` half way instead
    of that exchange's message. `LOGS`: every odd user message but the log's and the last pastes a short log."""
    log_at, compact_at = max(1, round(exchanges / 3)), max(1, round(exchanges / 2)) if compact else None
    if exchanges < 2 or compact_at in (log_at, exchanges):
        msg = "the support session needs at least 2 exchanges after the first message, /compact at least 4"
        raise ValueError(msg)
    zh = language == CHINESE
    first = (FIRST_FACTS_ZH, "谢谢。") if zh else (FIRST_FACTS, "Thanks.")
    user_text, reply = (_message(text, seed, message_tokens, language) for seed, text in enumerate(first))
    session = [Exchange(0, user_text, reply)]
    for index in range(1, exchanges + 1):
        if index == compact_at:
            session.append(Exchange(index, COMPACT_COMMAND, "", compact=True))
            continue
        if index == exchanges:
            user_text = FINAL_QUESTION_ZH if zh else FINAL_QUESTION
        elif index == log_at:
            user_text = (
                "这是发布失败时的日志：\n" if zh else "Here is the log of the failing rollout:\n"
            ) + pasted_log()
        elif language == LOGS and index % 2 == 1:
            user_text = short_log_message(index, message_tokens)
        else:
            user_text = filler_message(2 * index, message_tokens, language)
        tool_calls = 0 if index % TOOL_TURN_EVERY != 3 or index == exchanges else 1 + (index % 12 == 9)
        reply = filler_message(2 * index + 1, message_tokens, language)
        session.append(Exchange(index, user_text, reply, tool_calls, f"{index * 37}*{index + 12}/4"))
    texts = [text for e in session if not e.compact for text in (e.user_text, e.reply)]
    if len(set(texts)) != len(texts):
        msg = "the scripted session repeats a message text; the benchmark identifies stored messages by text"
        raise ValueError(msg)
    return session


def switch_exchange(exchanges: int) -> int:
    """From here on the switched-on scenario runs with the switch on: three quarters in."""
    return max(1, round(exchanges * 3 / 4))


def filler_message(index: int, tokens: int = MESSAGE_TOKENS, language: str = ENGLISH) -> str:
    """A troubleshooting message of about `tokens` tokens: from the user for even `index`, else a reply."""
    opening = ("第 {} 步：", "关于第 {} 步：") if language == CHINESE else ("Step {}:", "For step {}:")
    return _message(opening[index % 2].format(index // 2), index, tokens, language)


def _message(opening: str, seed: int, tokens: int, language: str) -> str:
    """Sentences (a user's for even `seed`, else a reply's) after `opening` until about `tokens` tokens."""
    zh = language == CHINESE
    sentences = ((USER_SENTENCES_ZH, REPLY_SENTENCES_ZH) if zh else (USER_SENTENCES, REPLY_SENTENCES))[seed % 2]
    rng, parts, joiner = random.Random(seed), [opening], "" if zh else " "
    while COUNTER.text(joiner.join(parts)) < tokens - 20:
        parts.append(rng.choice(sentences).format(**_slots(rng, chinese=zh)))
    return joiner.join(parts)


def short_log_message(index: int, tokens: int = MESSAGE_TOKENS) -> str:
    """A user message pasting a short log, about `tokens` real tokens: one line of text, then key=value lines."""
    rng = random.Random(10_000 + index)
    service = rng.choice(SERVICES)
    lines = [f"Step {index}: this is what the {service} pods printed right after the last change:"]
    while COUNTER.text("\n".join(lines)) < tokens - 20:
        lines.append(
            SHORT_LOG_LINE.format(
                minute=index % 60,
                second=len(lines) % 60,
                millis=rng.randint(0, 999),
                level=rng.choice(("INFO", "WARN", "ERROR")),
                service=rng.choice(SERVICES),
                replica=f"{rng.getrandbits(40):010x}",
                suffix=f"{rng.getrandbits(20):05x}",
                subnet=rng.randint(0, 15),
                host=rng.randint(2, 250),
                trace=f"{rng.getrandbits(64):016x}",
                request=f"req-{rng.getrandbits(32):08x}",
                event=rng.choice(LOG_EVENTS),
                latency=rng.randint(1, 30_000),
                attempt=rng.randint(1, 5),
            )
        )
    return "\n".join(lines)


def _slots(rng: random.Random, *, chinese: bool = False) -> dict[str, object]:
    return {
        "service": rng.choice(SERVICES),
        "component": rng.choice(COMPONENTS_ZH if chinese else COMPONENTS),
        "phase": rng.choice(PHASES_ZH if chinese else PHASES),
        "setting": rng.choice(SETTINGS_ZH if chinese else SETTINGS),
        "command": rng.choice(COMMANDS),
        "code": rng.randint(100, 999),
        "n": rng.randint(3, 90),
        "status": rng.choice((502, 503, 504)),
        "a": rng.randint(2, 64),
        "b": rng.randint(65, 256),
        "mib": rng.choice((256, 384, 512, 768)),
    }


def pasted_log() -> str:
    rng = random.Random(5_000)
    lines: list[str] = []
    while sum(len(line.split()) for line in lines) < LOG_WORDS:
        lines.append(
            LOG_LINE.format(
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
        )
    return "\n".join(lines)
