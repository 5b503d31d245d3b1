"""Runtimes for tests: folds after the reply in this process, as `langflow run` has them, with usage observed afresh."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from langflow_summarizing_agent.wiring import after_reply, runtime
from langflow_summarizing_agent.wiring.after_reply import AfterReply


@contextmanager
def folding_after_replies(max_running: int | None = None) -> Iterator[AfterReply]:
    """A runtime whose folds run after the reply, current while the block runs; yields its timing."""
    after_reply.install_reply_listener(lambda: runtime.current().timing)
    folds = AfterReply(max_running)
    with runtime.using(runtime.Runtime(timing=folds)):
        yield folds
