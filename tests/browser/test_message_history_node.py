"""A new Summarizing Message History on the canvas, as the sidebar adds it: it shows its window, Number of Messages at
the recommended 10, on the node while Summarize Older Messages is on (the stock default 100 in the Parameters panel
while it is off)."""

from __future__ import annotations

from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from langflow_summarizing_agent.engine.settings import DEFAULT_N_MESSAGES, SUMMARIZING_N_MESSAGES
from tests.support.browser import (
    click,
    clickable,
    one_node_flow,
    saved_template,
    screenshot_on_failure,
    visible,
    wait_for,
)
from tests.support.flow_files import HISTORY_TYPE
from tests.support.server_fixtures import LangflowServer, ServerUser

pytestmark = pytest.mark.browser

WINDOW_FIELD = "int_int_n_messages"
SWITCH = "toggle_bool_summarize_older_messages"


def _history_flow(server: LangflowServer, user: ServerUser) -> str:
    """A new flow holding one Summarizing Message History as the sidebar adds it."""
    return one_node_flow(server, user, HISTORY_TYPE, name="Message History node test", viewport_y=-200)


def _saved(server: LangflowServer, user: ServerUser, flow_id: str) -> dict[str, Any]:
    return saved_template(server, user, flow_id, HISTORY_TYPE)


def _switch(
    driver: WebDriver, server: LangflowServer, user: ServerUser, flow_id: str, *, on: bool, window: bool = True
) -> dict[str, Any]:
    """Set Summarize Older Messages on the node, clicking again if a click is lost while the node still loads; the
    template saved once the node has refreshed from the server (with `window`, once the window follows the switch)."""
    wanted = "true" if on else "false"
    expected = SUMMARIZING_N_MESSAGES if on else DEFAULT_N_MESSAGES

    def switched(d: WebDriver) -> bool:
        if clickable(d, SWITCH).get_attribute("aria-checked") != wanted:
            click(d, SWITCH)
            return False
        template = _saved(server, user, flow_id)
        followed = not window or template["n_messages"]["value"] == expected
        return template["summarize_older_messages"]["value"] is on and followed

    wait_for(driver, switched, f"Summarize Older Messages {wanted} on the node and saved")
    return _saved(server, user, flow_id)


def _window_on_the_node(driver: WebDriver) -> list[str]:
    return [
        field.get_attribute("value") or ""
        for field in driver.find_elements(By.CSS_SELECTOR, f"[data-testid='{WINDOW_FIELD}']")
    ]


def _open(driver: WebDriver, server: LangflowServer, flow_id: str) -> None:
    driver.get(f"{server.base_url}/flow/{flow_id}")
    visible(driver, "title-Summarizing Message History")


def test_a_new_node_shows_its_window_of_10_on_the_node_while_the_switch_is_on(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser
) -> None:
    browser = logged_in
    flow_id = _history_flow(langflow_server, user)
    try:
        _open(browser, langflow_server, flow_id)
        shown = wait_for(browser, lambda d: _window_on_the_node(d) or None, "Number of Messages on the node")
        off = _switch(browser, langflow_server, user, flow_id, on=False)
        hidden = wait_for(browser, lambda d: not _window_on_the_node(d), "Number of Messages off the node")
        on = _switch(browser, langflow_server, user, flow_id, on=True)
        again = wait_for(browser, lambda d: _window_on_the_node(d) or None, "Number of Messages back on the node")
    except Exception:
        screenshot_on_failure(browser, "message-history-window-failure.png")
        raise

    assert shown == [str(SUMMARIZING_N_MESSAGES)]
    assert (off["n_messages"]["value"], off["n_messages"]["advanced"], hidden) == (DEFAULT_N_MESSAGES, True, True)
    assert (on["n_messages"]["value"], on["n_messages"]["advanced"]) == (SUMMARIZING_N_MESSAGES, False)
    assert again == [str(SUMMARIZING_N_MESSAGES)]
