"""The catch-up after the reply: when it starts (`signals`), what it knows of the turn (`reply`), and when it runs
(`folds`), in one package.

On `langflow run` a turn never waits for a summary call: it reads and plans, and leaves the session's fold for after
its reply (`AfterReply`, the runtime's fold timing there; `wiring.timing.Inline` folds in the turn elsewhere).

**When it starts: after the final reply.** Langflow stores a message before it is final: the Agent stores its reply
as `state: partial` before it calls the model, and a streamed Chat Output stores an empty row before its text. So a
stored row alone never starts a fold. Each component says which signal its turn waits for (`ReplySignal`):
- `BUILD_END`, the Agent: its reply is its own output, final when its `message_response` returns it, or else when
  the task that builds it ends (`signal_build_end`), in every flow shape (with or without a Chat Output, streaming or
  not, run API or Playground). What the fold needs is taken then, as a frozen `Reply`.
- `STORED_REPLY`, the Message History: its reply comes from another component, final when Langflow stores a message
  of another sender than the user in the session that is not partial and has text (`install_reply_listener`, new or
  updated rows). A flow whose reply is never stored (no Chat Output) gives no such signal: the session's next turn
  is then the sign that the reply ended, and its fold runs at once; the last turn's, after `REPLY_WAIT_SECONDS`.

**What it knows: `Reply`**, frozen when the signal comes: the reply as the newest message not stored yet (the Agent's,
as Chat Output stores it next), and, when the Agent's own model folds and its provider caches prompts, the prompt the
agent just sent (`engine.fold.Prefix`), for the fold to ask on, which the provider serves from its cache.

**When it runs: `AfterReply`**, one record per session scope (`_SessionFolds`), at most `max_running` summary calls
at once in the process (`SUMMARIZING_AGENT_MAX_BACKGROUND_FOLDS`, default 4); more folds wait for a place, one per
session:
- a later turn of a session whose fold still waits gives it its own job, so the fold that gets the place folds what
  the newest turn left, not what was due when it began to wait;
- a turn that finds its session's fold running leaves its job as the session's next fold, which starts when the
  running one ends (only the newest turn's: at most one running and one next fold per session);
- each fold holds the session's fold lock (`SessionStore.fold_lock`): a fold that finds it held in another worker
  makes no summary call, waits for that fold without holding a place, and then runs again (waiting again if the
  other worker started the session's next fold meanwhile), so it follows them as the session's next fold would in
  one worker (unless a newer turn here left one);
- while a fold waits or runs, it marks the session's summary (`SessionStore.mark_fold_queued`), so a read through
  the API in any worker waits for it; a mark that cannot be written is logged, and the fold goes on;
- a fold that fails is logged and recorded for the session's next turn; one that is cancelled (the server shuts
  down) leaves the summary as it was, since only a completed fold saves.
"""

from langflow_summarizing_agent.wiring.after_reply.folds import (
    DEFAULT_MAX_RUNNING,
    MAX_RUNNING_ENV,
    QUEUED_MARK_SECONDS,
    REPLY_WAIT_SECONDS,
    AfterReply,
    max_running_from_environment,
)
from langflow_summarizing_agent.wiring.after_reply.reply import (
    FOLD_WAIT_SECONDS,
    FoldJob,
    FoldsElsewhere,
    Reply,
    ReplySignal,
    TurnWork,
    fold_after_reply,
)
from langflow_summarizing_agent.wiring.after_reply.signals import (
    install_reply_listener,
    is_final_reply,
    signal_build_end,
)

__all__ = [
    "DEFAULT_MAX_RUNNING",
    "FOLD_WAIT_SECONDS",
    "MAX_RUNNING_ENV",
    "QUEUED_MARK_SECONDS",
    "REPLY_WAIT_SECONDS",
    "AfterReply",
    "FoldJob",
    "FoldsElsewhere",
    "Reply",
    "ReplySignal",
    "TurnWork",
    "fold_after_reply",
    "install_reply_listener",
    "is_final_reply",
    "max_running_from_environment",
    "signal_build_end",
]
