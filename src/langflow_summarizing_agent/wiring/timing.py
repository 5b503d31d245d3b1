"""When a fold runs: an object chosen once, where the process starts, and handed to every turn in the runtime.

- `Inline`: a turn folds what is due before the model is called. For `lfx run` and scripts, where no event loop
  outlives the turn; the process's runtime uses it unless a server installed another.
- `after_reply.AfterReply`: a turn never waits for a summary call; its fold runs after the final reply
  (`wiring.after_reply`, the one home of that fold). The `langflow.plugins` entry point installs it on `langflow
  run` (`wiring.plugin`).

Both answer `/compact` with a fold in the turn (`AfterReply` first waits for the session's running fold).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Protocol

from langflow_summarizing_agent.engine.fold import CatchUp
from langflow_summarizing_agent.engine.records import ScopeKey
from langflow_summarizing_agent.engine.turn import Turn, compact, fold_if_due
from langflow_summarizing_agent.wiring.after_reply import Reply, TurnWork


class FoldTiming(Protocol):
    """When a turn's due fold runs."""

    async def turn(self, work: TurnWork) -> Turn: ...

    async def compact(self, work: TurnWork) -> Turn: ...

    def previous(self, key: ScopeKey) -> CatchUp | None:
        """The fold that ran after the session's previous reply, once: the next turn reports it."""
        ...

    def replied(self, flow_id: str, session_id: str) -> None:
        """A final reply is stored in the session."""
        ...

    def built(self, key: ScopeKey, turn: Hashable, reply: Reply) -> None:
        """The Agent's build of `turn` ended with `reply`."""
        ...

    def forget(self, key: ScopeKey) -> None:
        """Drop the report of a deleted session's last fold."""
        ...

    async def wait_for(self, match: Callable[[ScopeKey], bool]) -> None:
        """Wait for the folds running in this process whose session `match` accepts."""
        ...


class Inline:
    """Folds in the turn, before the model is called."""

    async def turn(self, work: TurnWork) -> Turn:
        return await fold_if_due(work.store, work.summarizer, work.settings, failures=work.failures)

    async def compact(self, work: TurnWork) -> Turn:
        return await compact(work.store, work.summarizer, work.settings, failures=work.failures)

    def previous(self, key: ScopeKey) -> CatchUp | None:
        return None

    def replied(self, flow_id: str, session_id: str) -> None:
        return None

    def built(self, key: ScopeKey, turn: Hashable, reply: Reply) -> None:
        return None

    def forget(self, key: ScopeKey) -> None:
        return None

    async def wait_for(self, match: Callable[[ScopeKey], bool]) -> None:
        return None
