"""The defaults that component code saved in flows by version 0.1.0 imports (`from langflow_summarizing_agent.fold
import DEFAULT_FOLD_BATCH, ...`). The fold itself is `engine.fold`; the defaults live in `engine.settings`."""

from langflow_summarizing_agent.engine.settings import (
    DEFAULT_FOLD_BATCH,
    DEFAULT_HISTORY_TOKEN_BUDGET,
    DEFAULT_MAX_FOLDS_PER_TURN,
    DEFAULT_SUMMARY_WORDS,
)

__all__ = ["DEFAULT_FOLD_BATCH", "DEFAULT_HISTORY_TOKEN_BUDGET", "DEFAULT_MAX_FOLDS_PER_TURN", "DEFAULT_SUMMARY_WORDS"]
