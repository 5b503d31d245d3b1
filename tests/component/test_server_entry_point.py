"""The server's entry point installs folds after the reply, once: checked in a fresh Python, whose runtime no other
test has made current."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _started_process(code: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=True
    )
    return completed.stdout.strip()


def test_the_servers_entry_point_installs_folds_after_the_reply_once() -> None:
    printed = _started_process(
        """
        from langflow_summarizing_agent.wiring import plugin, runtime

        class App:
            def include_router(self, router):
                pass

        plugin.install_routes_and_listeners(App())
        first = runtime.current()
        plugin.install_routes_and_listeners(App())
        print(type(first.timing).__name__, runtime.current() is first)
        """
    )
    assert printed.splitlines()[-1] == "AfterReply True"
