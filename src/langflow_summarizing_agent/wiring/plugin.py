"""Langflow wiring at startup: the `langflow.plugins` entry point.

When Langflow creates its FastAPI app (once per worker process), it calls every `langflow.plugins` entry point with
the app. Ours, `install_routes_and_listeners`, does the four things this package needs from a running Langflow:

1. it adds the HTTP API of `api` (read and reset a session's summary) and of `memory_api` (edit, seed and roll it
   back, read its versions), under `api.ROUTE_PREFIX`;
2. it installs the SQLAlchemy listeners of `lifecycle`, which purge or move summaries in the transaction that
   deletes or renames messages;
3. it installs the process's runtime with the catch-up after the reply (`after_reply.AfterReply`), as a server's
   event loop outlives the turn (a runtime installed before stays), the listener that signals a stored final reply,
   and, with that timing, a shutdown hook in Langflow's lifespan that cancels running folds before the database
   closes;
4. it sets this package's log level to the server's (`--log-level`, which `langflow run` puts in
   `LANGFLOW_LOG_LEVEL`): the package logs through Python's `logging`, whose root logger in a Langflow server is set
   up by one of its libraries at INFO, so a turn's report would otherwise reach the console of a server started at
   `warning`.

Routes come first: Langflow rolls back a failed plugin's routes but nothing else it did. Nothing else runs at
import time or startup (a bad `SUMMARIZING_AGENT_MAX_BACKGROUND_FOLDS` or `SUMMARIZING_AGENT_VERSIONS_KEPT` stops
the server with its name); the summary
table is brought to head before the first turn reads it (`Runtime.ready`) or by `langflow summarizing-agent
migrate`. The component itself is found through the `langflow.extensions` entry point, and standalone `lfx` loads
neither.
"""

from __future__ import annotations

import logging
import os
from typing import Protocol

from fastapi import APIRouter

from langflow_summarizing_agent import langflow_private
from langflow_summarizing_agent.storage.versions import versions_kept
from langflow_summarizing_agent.wiring import after_reply, api, lifecycle, memory_api, runtime

__all__ = ["install_routes_and_listeners"]


class RouteTarget(Protocol):
    """What Langflow hands a plugin: the app, or a wrapper of it that only adds routes."""

    def include_router(self, router: APIRouter) -> None: ...


def install_routes_and_listeners(app: RouteTarget) -> None:
    """Add the summary routes to `app` (Langflow hands plugins a wrapper that only adds routes), install the
    message listeners and the server's runtime, whose catch-ups run after the reply. Called again, it adds the routes
    to the `app` given and changes nothing else."""
    app.include_router(api.router)
    app.include_router(memory_api.router)
    versions_kept()
    lifecycle.install_listeners()
    folds = after_reply.AfterReply(after_reply.max_running_from_environment())
    installed = runtime.install(runtime.Runtime(timing=folds))
    after_reply.install_reply_listener(lambda: runtime.current().timing)
    if isinstance(installed.timing, after_reply.AfterReply):
        _add_shutdown_hook(installed.timing.shutdown)
    _follow_the_servers_log_level()


def _follow_the_servers_log_level() -> None:
    level = logging.getLevelName(os.environ.get("LANGFLOW_LOG_LEVEL", "").upper())
    if isinstance(level, int):
        logging.getLogger(__name__.split(".", 1)[0]).setLevel(level)


def _add_shutdown_hook(hook: langflow_private.ShutdownHook) -> None:
    """Run `hook` first when Langflow's lifespan ends, through the registry Langflow keeps for plugins' lifespan
    hooks. Without that registry the folds are cancelled with the event loop, which also leaves summaries as they were.
    """
    hooks = langflow_private.lifespan_shutdown_hooks()
    if hooks is not None and hook not in hooks:
        hooks.append(hook)
