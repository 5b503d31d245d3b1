"""The package's log level is the server's: `LANGFLOW_LOG_LEVEL`, which `langflow run --log-level` sets."""

from __future__ import annotations

import logging

import pytest

from langflow_summarizing_agent.wiring import plugin

PACKAGE_LOGGER = logging.getLogger("langflow_summarizing_agent")


@pytest.fixture(autouse=True)
def _restore_the_level():
    level = PACKAGE_LOGGER.level
    yield
    PACKAGE_LOGGER.setLevel(level)


@pytest.mark.parametrize(("server", "expected"), [("warning", logging.WARNING), ("debug", logging.DEBUG)])
def test_the_package_logs_at_the_servers_level(monkeypatch: pytest.MonkeyPatch, server: str, expected: int) -> None:
    monkeypatch.setenv("LANGFLOW_LOG_LEVEL", server)
    plugin._follow_the_servers_log_level()
    report = logging.getLogger("langflow_summarizing_agent.wiring.agent_turn")
    assert report.getEffectiveLevel() == expected
    assert report.isEnabledFor(logging.WARNING), "warnings and errors still reach the server's log"


# "success": a level of Langflow's logger (loguru) that Python's logging does not know. Not "trace": uvicorn, which
# another test may have imported in this process, registers TRACE with Python's logging.
@pytest.mark.parametrize("server", [None, "success"])
def test_no_level_or_one_python_does_not_know_leaves_the_level_alone(
    monkeypatch: pytest.MonkeyPatch, server: str | None
) -> None:
    PACKAGE_LOGGER.setLevel(logging.NOTSET)
    if server is None:
        monkeypatch.delenv("LANGFLOW_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("LANGFLOW_LOG_LEVEL", server)
    plugin._follow_the_servers_log_level()
    assert PACKAGE_LOGGER.level == logging.NOTSET
