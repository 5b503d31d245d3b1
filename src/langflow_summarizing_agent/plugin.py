"""Langflow wiring at startup: the `langflow.plugins` entry point.

When Langflow creates its FastAPI app (once per worker process), it calls every `langflow.plugins` entry point with
the app. Ours, `install_routes_and_listeners`, does the two things this package needs from a running Langflow:

1. it adds the HTTP API of `api` (inspect and reset a session's summary), under `api.ROUTE_PREFIX`;
2. it installs the SQLAlchemy listeners of `lifecycle`, which purge or move summaries in the transaction that
   deletes or renames messages.

Routes come first: Langflow rolls back a failed plugin's routes but nothing else it did. Nothing else runs at
import time or startup; the state table is migrated on first use (`migrate.ensure_migrated`) or by
`langflow summarizing-agent migrate`. The component itself is found through the `langflow.extensions` entry
point, and standalone `lfx` loads neither.
"""

from __future__ import annotations

from typing import Any

from langflow_summarizing_agent import api, lifecycle

__all__ = ["install_routes_and_listeners"]


def install_routes_and_listeners(app: Any) -> None:
    """Add the summary routes to `app` (Langflow hands plugins a wrapper that only adds routes) and install the
    message listeners (idempotent)."""
    app.include_router(api.router)
    lifecycle.install_listeners()
