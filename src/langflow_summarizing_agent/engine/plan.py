"""The plan: what a turn sends word for word and what it folds, decided by one pure function, `plan_turn()`.

Nothing here reads or writes: `plan_turn()` takes what `read.read_turn()` returned and the settings, and every path
(a turn, the catch-up after the reply, scripts, `lfx run`) plans with it; `/compact` plans with `plan_compaction()`,
which sends the same and folds what may be folded now. The verbatim policy is written once, in `plan_turn()`'s
docstring, and read top to bottom: the window (`_history`), what is sent (`_send`), what may fold (`_foldable`),
why a fold is due (`_fold_reason`) and whether it waits for the back-off (`_backing_off`).

Public contract: `COMPACT_COMMAND` is the exact user message that folds on demand; its reply starts with
`COMPACT_REPLY_PREFIX`, or `COMPACT_FAILED_PREFIX` when nothing could be folded. Both are left out of every plan:
never sent to the model, never folded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX, not_summarized_note, render_summary_message
from langflow_summarizing_agent.engine.records import StoredMessage, Summary
from langflow_summarizing_agent.engine.settings import BUDGET_TARGET_SHARE, MIN_CUT_TOKENS, FoldSettings
from langflow_summarizing_agent.engine.tokens import cut_text_to_tokens, cut_to_tokens

COMPACT_COMMAND = "/compact"
COMPACT_REPLY_PREFIX = "Compacted the conversation:"
COMPACT_FAILED_PREFIX = "Compaction failed:"
"""How the reply to a `/compact` that folded nothing, its summary call failing, starts."""


def is_compaction_exchange(message: StoredMessage) -> bool:
    """`/compact` and its reply are never fed to the model nor folded."""
    text = message.text.strip()
    if message.role == "user":
        return text == COMPACT_COMMAND
    return text.startswith((COMPACT_REPLY_PREFIX, COMPACT_FAILED_PREFIX))


@dataclass(frozen=True)
class TurnRead:
    """What a plan is made from: the summary and the newest messages before the current input, ascending, folded
    or not, back to the cursor or until they fill the budget (`read.read_turn`). When those do not reach back to the
    cursor, `older` holds the unfolded messages read from the cursor forwards and `unread` counts the unfolded
    messages between `older` and `messages`, which were not read.
    `upcoming` are newer messages not stored yet that the plan counts as the newest (the reply the catch-up after the
    reply plans the next turn with); they are never folded."""

    summary: Summary
    messages: tuple[StoredMessage, ...]
    older: tuple[StoredMessage, ...] = ()
    unread: int = 0
    upcoming: tuple[StoredMessage, ...] = ()

    def with_summary(self, summary: Summary) -> TurnRead:
        return replace(self, summary=summary)


@dataclass(frozen=True)
class Plan:
    """What one turn folds and what it sends, decided by `plan_turn()` (or `plan_compaction()`) from what the turn
    read."""

    fold: tuple[StoredMessage, ...]
    """Messages to fold now, oldest first, from the cursor forwards; empty when no fold is due."""
    send: tuple[StoredMessage, ...]
    """Messages sent word for word, oldest first; a message cut to fit the budget ends with `CUT_MARKER`."""
    summary_text: str | None
    not_summarized: int
    """Messages older than what is sent that the summary does not cover yet (folds failing or waiting)."""
    history_tokens: int
    reason: str | None = None
    """Why a fold is due: "fold batch", "history token budget" or "/compact"."""
    postponed: bool = False
    """A fold is due but waits for the back-off of earlier failures."""
    window: int = 0
    """Messages in the window: what the stock Agent at the same settings sends."""
    window_sent: int = 0
    """Messages of the window that are sent: fewer than `window` when the window does not fit the budget."""
    cut: int = 0
    """Messages sent cut to fit the budget (ending with `CUT_MARKER`)."""


def plan_turn(read: TurnRead, settings: FoldSettings, *, now: datetime) -> Plan:
    """The verbatim policy: one pure decision of what to fold and what to send, used by every path.

    `read` is what `read_turn()` returned (see `TurnRead`).

    1. The window is what the stock Agent at the same `n_messages` sends: the newest `n_messages - 1` messages,
       `/compact` exchanges left out. It goes word for word, unless it does not fit the History Token Budget after
       the summary message: then the newest messages that fit go. The newest exchange always goes; a message that
       does not fit is cut, with a marker, only when it is part of the newest exchange or is alone larger than the
       budget, and always at the same point (`FoldSettings.cut_tokens`), so consecutive calls share their prefix. A
       message alone larger than the budget never goes whole, so it weighs what its cut weighs.
    2. Unfolded messages older than the window that the turn read (`messages`: back to the cursor, or until they
       fill the budget; without a budget, at most twice Fold Batch) go word for word too while the whole window and
       they fit: a message leaves the model's view only by being folded, or, while folds fail or wait, counted as
       not summarized yet.
    3. A fold takes only unfolded messages older than the oldest message of the window that is sent, from the
       cursor forwards, at most `catch_up_messages` of them. It is due when those older than the window reach Fold
       Batch, or when the summary and the unfolded history pass `budget_trigger_share` of the budget (with a
       provider that caches prompts, the budget less the newest exchange if that is more, and only once the fold
       brings them to `BUDGET_TARGET_SHARE` or an unfolded message is left out; while a message alone larger than
       the budget sits in the window, only once an unfolded message is left out); it waits while the back-off of
       earlier failures runs (`postponed`).
    """
    history = _history(read, settings)
    send = _send(history, settings)
    foldable = _foldable(history, send, settings)
    reason = _fold_reason(history, send, foldable, settings) if foldable else None
    postponed = reason is not None and _backing_off(read.summary, now)
    return _plan(history, send, settings, foldable if reason and not postponed else (), reason, postponed)


def plan_compaction(read: TurnRead, settings: FoldSettings, *, now: datetime) -> Plan:
    """What `/compact` plans: it sends what `plan_turn()` sends and folds what may be folded now, due or not,
    back-off or not (so `now` does not matter)."""
    history = _history(read, settings)
    send = _send(history, settings)
    foldable = _foldable(history, send, settings)
    return _plan(history, send, settings, foldable, "/compact" if foldable else None)


@dataclass(frozen=True)
class _History:
    """What a plan weighs: the messages read and upcoming, ascending, `/compact` exchanges left out."""

    summary: Summary
    window: tuple[StoredMessage, ...]
    unfolded: tuple[StoredMessage, ...]
    """All that the summary does not cover, the window's included."""
    backlog: tuple[StoredMessage, ...]
    """The backlog (unfolded messages older than the window) as far as it was read newest first (`messages`) or is
    upcoming: what may go word for word besides the window."""
    older_than_window: int
    """Messages in the backlog, read or not."""
    unread: int
    from_cursor: frozenset[str]
    """Ids of the messages read from the cursor forwards (`older`)."""
    upcoming: frozenset[str]
    tokens: dict[str, int]
    """Tokens of each message as it goes, by id."""
    sent_as: dict[str, StoredMessage]
    """Messages larger than the whole budget, by id, as they always go: cut (`_cut`)."""


def _history(read: TurnRead, settings: FoldSettings) -> _History:
    upcoming = _stamped_after(read.upcoming, (*read.older, *read.messages))
    visible = [m for m in _merged(read.older, [*read.messages, *upcoming]) if not is_compaction_exchange(m)]
    window = visible[-settings.window :] if settings.window else []
    window_ids = {m.id for m in window}
    unfolded = [m for m in visible if not read.summary.covers(m)]
    readable = {m.id for m in (*read.messages, *upcoming)}
    older = [m for m in unfolded if m.id not in window_ids]
    tokens = {m.id: settings.counter.message(m) for m in visible}
    sent_as = _always_cut(visible, tokens, settings)
    return _History(
        summary=read.summary,
        window=tuple(window),
        unfolded=tuple(unfolded),
        backlog=tuple(m for m in older if m.id in readable),
        older_than_window=len(older) + read.unread,
        unread=read.unread,
        from_cursor=frozenset(m.id for m in read.older),
        upcoming=frozenset(m.id for m in upcoming),
        tokens=tokens | {key: settings.counter.message(cut) for key, cut in sent_as.items()},
        sent_as=sent_as,
    )


def _always_cut(
    messages: Sequence[StoredMessage], tokens: dict[str, int], settings: FoldSettings
) -> dict[str, StoredMessage]:
    """Messages larger than the whole budget never go whole: each goes cut, at the same point on every turn, and
    weighs what its cut weighs, so the messages that fit beside it go too and no fold is due for its full size."""
    budget = settings.history_token_budget
    if budget <= 0:
        return {}
    return {m.id: _cut(m, settings) for m in messages if tokens[m.id] > budget}


def budget_tokens(message: StoredMessage, settings: FoldSettings) -> int:
    """Tokens `message` takes in the History Token Budget as it goes: its own, or its cut's when it is larger than the
    whole budget (`_always_cut`)."""
    tokens = {message.id: settings.counter.message(message)}
    cut = _always_cut([message], tokens, settings).get(message.id)
    return tokens[message.id] if cut is None else settings.counter.message(cut)


def _send(history: _History, settings: FoldSettings) -> list[StoredMessage]:
    """What goes word for word, oldest first: with no budget the window and the backlog; else the window and the
    newest of the backlog that fit with it, or, when the window does not fit, what fits of it."""
    budget = settings.history_token_budget
    if budget <= 0:
        return [*history.backlog, *history.window]
    window_tokens = sum(history.tokens[m.id] for m in history.window)
    if window_tokens + _summary_tokens(history.summary, settings, history.older_than_window) <= budget:
        shown = [*_backlog_that_fits(history, settings, budget - window_tokens), *history.window]
        return [history.sent_as.get(m.id, m) for m in shown]
    hidden = len(history.unfolded) + history.unread
    room = budget - _summary_tokens(history.summary, settings, hidden)
    return list(reversed(_fit_window(history, room, settings)))


def _backlog_that_fits(history: _History, settings: FoldSettings, room: int) -> list[StoredMessage]:
    """The newest messages of the backlog that fit in `room` with the summary message, oldest first; each one shown
    is one fewer that the summary message notes as not summarized."""
    shown: list[StoredMessage] = []
    used = 0
    for message in reversed(history.backlog):
        size = history.tokens[message.id]
        hidden = history.older_than_window - len(shown) - 1
        if used + size + _summary_tokens(history.summary, settings, hidden) > room:
            break
        shown.append(message)
        used += size
    return shown[::-1]


def _foldable(history: _History, send: Sequence[StoredMessage], settings: FoldSettings) -> tuple[StoredMessage, ...]:
    """Unfolded messages older than the oldest window message sent, from the cursor forwards without a gap (only
    what was read from the cursor when some were not read), never an upcoming one, at most `catch_up_messages`."""
    window_ids = {m.id for m in history.window}
    window_start = next((m.cursor for m in send if m.id in window_ids), None)
    foldable = [m for m in history.unfolded if window_start is None or m.cursor < window_start]
    if history.unread:
        foldable = [m for m in foldable if m.id in history.from_cursor]
    return tuple(m for m in foldable if m.id not in history.upcoming)[: settings.catch_up_messages]


def _fold_reason(
    history: _History, send: Sequence[StoredMessage], foldable: Sequence[StoredMessage], settings: FoldSettings
) -> str | None:
    """Why a fold is due: the budget, or the unfolded messages older than the window reaching Fold Batch.

    The budget folds when the summary and the unfolded history pass `_budget_trigger()` and, with a provider that
    caches prompts, the fold brings them to `BUDGET_TARGET_SHARE` or below or an unfolded message is left out. While
    a message that always goes cut sits in the window (`_holds_a_cut`), it folds only when a message is left out."""
    budget = settings.history_token_budget
    if budget > 0 and _holds_a_cut(history):
        if _leaves_out(history, send):
            return "history token budget"
    elif budget > 0 and (unfolded := _unfolded_tokens(history, settings)) > _budget_trigger(history, settings):
        left = unfolded - sum(history.tokens[m.id] for m in foldable)
        if not settings.prompt_cache or left <= BUDGET_TARGET_SHARE * budget or _leaves_out(history, send):
            return "history token budget"
    if history.older_than_window >= settings.effective_fold_batch:
        return "fold batch"
    return None


def _holds_a_cut(history: _History) -> bool:
    """A message larger than the whole budget sits in the window. Its cut takes about half the budget there, for as
    long as the window holds it, and no fold may take it: a fold could take only the messages the window lets go,
    two at each exchange, and the budget would pass its trigger again at the next one. Those messages wait for a
    fold beside the window while they fit."""
    return any(m.id in history.sent_as for m in history.window)


def _budget_trigger(history: _History, settings: FoldSettings) -> float:
    """Tokens of the summary and the unfolded history past which a budget fold is due: `budget_trigger_share` of the
    budget; with a provider that caches prompts, the budget less the newest exchange when that is more. Each fold makes
    the agent's next call miss its history in the cache, so it waits while one more exchange like the newest fits: a
    fold that ends after the next turn starts still leaves nothing out."""
    budget = settings.history_token_budget
    share = settings.budget_trigger_share * budget
    if not settings.prompt_cache:
        return share
    return max(share, budget - sum(history.tokens[m.id] for m in history.window[-2:]))


def _leaves_out(history: _History, send: Sequence[StoredMessage]) -> bool:
    """Some unfolded message is not sent: only a fold brings it to the model."""
    sent = {m.id for m in send}
    return history.unread > 0 or any(m.id not in sent for m in history.unfolded)


def _unfolded_tokens(history: _History, settings: FoldSettings) -> int:
    """Tokens of the summary message without its note and of every unfolded message."""
    bare_summary = render_summary_message(history.summary, settings.pinned_keys, 0) or ""
    return settings.counter.text(bare_summary) + sum(history.tokens[m.id] for m in history.unfolded)


def _backing_off(summary: Summary, now: datetime) -> bool:
    return summary.retry_after is not None and now < summary.retry_after


def _plan(
    history: _History,
    send: Sequence[StoredMessage],
    settings: FoldSettings,
    fold: Sequence[StoredMessage],
    reason: str | None,
    postponed: bool = False,
) -> Plan:
    """The plan, with the summary message noting the unfolded messages that are not sent, and its tokens."""
    sent_ids = {m.id for m in send}
    originals = {m.id: m.text for m in (*history.backlog, *history.window)}
    not_summarized = history.unread + sum(1 for m in history.unfolded if m.id not in sent_ids)
    summary_text = _summary_message(history.summary, settings, not_summarized)
    counter = settings.counter
    return Plan(
        fold=tuple(fold),
        send=tuple(send),
        summary_text=summary_text,
        not_summarized=not_summarized,
        history_tokens=sum(counter.message(m) for m in send) + (counter.text(summary_text) if summary_text else 0),
        reason=reason,
        postponed=postponed,
        window=len(history.window),
        window_sent=sum(1 for m in history.window if m.id in sent_ids),
        cut=sum(1 for m in send if m.text != originals.get(m.id, m.text)),
    )


def _stamped_after(upcoming: Sequence[StoredMessage], stored: Sequence[StoredMessage]) -> list[StoredMessage]:
    """`upcoming` in their order, each stamped after the newest stored message when it is not already: a cursor
    decides what a fold may take, and the clock that stamped a message not stored yet may be behind the database's."""
    newest = max((m.timestamp for m in stored), default=None)
    placed = []
    for message in upcoming:
        if newest is not None and message.timestamp <= newest:
            message = replace(message, timestamp=newest + timedelta(microseconds=1))
        placed.append(message)
        newest = message.timestamp
    return placed


def _merged(older: Sequence[StoredMessage], messages: Sequence[StoredMessage]) -> list[StoredMessage]:
    if not older:
        return list(messages)
    by_id = {m.id: m for m in (*older, *messages)}
    return sorted(by_id.values(), key=lambda m: m.cursor)


def _summary_message(summary: Summary, settings: FoldSettings, not_summarized: int) -> str | None:
    """The summary message, cut with a marker if it would leave no room in the budget for the newest exchange."""
    text = render_summary_message(summary, settings.pinned_keys, not_summarized)
    budget = settings.history_token_budget
    if text is None or budget <= 0:
        return text
    cap = budget - settings.newest_exchange_tokens
    body = render_summary_message(summary, settings.pinned_keys, 0) or SUMMARY_PREFIX
    widest_note = "\n\n" + not_summarized_note(999_999)
    counter = settings.counter
    if counter.text(body + widest_note) <= cap:
        return text
    cut = cut_text_to_tokens(body, cap - counter.text(widest_note), counter)
    if not not_summarized:
        return cut
    return cut + "\n\n" + not_summarized_note(not_summarized)


def _summary_tokens(summary: Summary, settings: FoldSettings, not_summarized: int) -> int:
    text = _summary_message(summary, settings, not_summarized)
    return settings.counter.text(text) if text else 0


def _fit_window(history: _History, room: int, settings: FoldSettings) -> list[StoredMessage]:
    """The window's messages that go, newest first: each that fits whole, and the newest exchange always. A message
    that does not fit whole goes cut (`_cut`) when it is part of the newest exchange or alone larger than `room`,
    and its cut fits; as the last resort, a message of the newest exchange is cut to what is left. Nothing older
    than a message that does not go goes."""
    window, tokens = history.window, history.tokens
    if not window:
        return []
    counter = settings.counter
    exchange = [m.id for m in window[-2:]]
    # While the newest message is placed, room stays for the user message of the newest exchange as its cut leaves
    # it, unless that leaves the newest message too little (the summary message over its reserve).
    held = min(tokens[exchange[0]], counter.message(_cut_of(history, window[-len(exchange)], settings)))
    if room - held < MIN_CUT_TOKENS:
        held = min(tokens[exchange[0]], MIN_CUT_TOKENS)
    sent: list[StoredMessage] = []
    used = 0
    for message in reversed(window):
        hold = held if len(exchange) == 2 and message.id == exchange[-1] else 0
        size = tokens[message.id]
        if used + size + hold <= room:
            sent.append(history.sent_as.get(message.id, message))
            used += size
            continue
        if message.id not in exchange and size <= room:
            break
        cut = _cut_of(history, message, settings)
        if used + counter.message(cut) + hold > room:
            if message.id not in exchange:
                break
            cut = cut_to_tokens(message, room - used - hold, counter)
        sent.append(cut)
        used += counter.message(cut)
    return sent


def _cut_of(history: _History, message: StoredMessage, settings: FoldSettings) -> StoredMessage:
    """`_cut(message)`, made once a plan for a message that always goes cut."""
    return history.sent_as.get(message.id) or _cut(message, settings)


def _cut(message: StoredMessage, settings: FoldSettings) -> StoredMessage:
    """`message` cut to `FoldSettings.cut_tokens`, counted at the scale's step: the cut depends only on the message and
    the settings, so a message is cut at the same point on every turn that sends it cut."""
    return cut_to_tokens(message, settings.cut_tokens, settings.counter.steady())
