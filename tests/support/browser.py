"""Driving Langflow's UI in headless Chromium: the browser, finding elements by the `data-testid` attributes of
Langflow's frontend, waiting for them, and the API calls the browser tests check what the UI saved with.

Uses the system's Chromium and chromedriver (Debian `chromium`, `chromium-driver`); Selenium Manager is never asked to
download a browser or driver.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import ElementClickInterceptedException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from langflow_summarizing_agent.engine.plan import COMPACT_FAILED_PREFIX, COMPACT_REPLY_PREFIX
from tests.support.postgres_database import running_in_ci
from tests.support.server_fixtures import LangflowServer, ServerUser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS_DIR = ROOT / "test-artifacts"
WAIT_SECONDS = 45
TURN_WAIT_SECONDS = 90
SAVE_WAIT_SECONDS = 20
CHROMIUM_ARGUMENTS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1600,1000",
)


def system_binary(*names: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    reason = f"{' or '.join(names)} is not installed (Debian: apt-get install chromium chromium-driver)"
    if running_in_ci():
        pytest.fail(f"CI=true needs the browser test: {reason}", pytrace=False)
    pytest.skip(reason)


def by_test_id(test_id: str) -> tuple[str, str]:
    return By.CSS_SELECTOR, f"[data-testid='{test_id}']"


def clickable(driver: WebDriver, test_id: str) -> WebElement:
    return WebDriverWait(driver, WAIT_SECONDS).until(expected_conditions.element_to_be_clickable(by_test_id(test_id)))


def visible(driver: WebDriver, test_id: str) -> WebElement:
    locator = by_test_id(test_id)
    return WebDriverWait(driver, WAIT_SECONDS).until(expected_conditions.visibility_of_element_located(locator))


def wait_for(driver: WebDriver, condition: Callable[[WebDriver], Any], what: str, seconds: float = WAIT_SECONDS) -> Any:
    # The chat re-renders while a reply streams in: an element found a moment ago may be gone; look again.
    wait = WebDriverWait(driver, seconds, ignored_exceptions=(StaleElementReferenceException,))
    return wait.until(condition, message=what)


def click(driver: WebDriver, test_id: str) -> None:
    """Click once the element takes the click: panels slide in, and a click meanwhile lands on what covers it."""

    def clicked(d: WebDriver) -> bool:
        clickable(d, test_id).click()
        return True

    ignored = (ElementClickInterceptedException, StaleElementReferenceException)
    wait = WebDriverWait(driver, WAIT_SECONDS, ignored_exceptions=ignored)
    wait.until(clicked, message=f"a click on {test_id}")


NEW_SESSION = "//*[starts-with(normalize-space(text()), 'New Session')]"
"""The Playground's name for the session a click on "+" opens, in the sessions list and the chat's header."""


def new_chat(driver: WebDriver) -> None:
    """Open a new session in the Playground, clicking "+" again while it shows none: a click while the Playground
    still loads the flow's sessions is lost, and the chat would go to the Default Session."""

    def opened(d: WebDriver) -> bool:
        if d.find_elements(By.XPATH, NEW_SESSION):
            return True
        try:
            clickable(d, "new-chat").click()
        except ElementClickInterceptedException:
            return False
        return bool(d.find_elements(By.XPATH, NEW_SESSION))

    wait_for(driver, opened, "a new session in the Playground")


def screenshot_on_failure(driver: WebDriver, name: str) -> None:
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS_DIR / name))
    (ARTIFACTS_DIR / name).with_suffix(".html").write_text(driver.page_source, encoding="utf-8")


def type_until_it_holds(driver: WebDriver, test_id: str, text: str) -> None:
    """Type `text` into an empty field and leave it; again if the node, still refreshing from the server, resets it."""

    def holds(d: WebDriver) -> bool:
        field = clickable(d, test_id)
        if field.get_attribute("value") != text:
            field.clear()
            field.send_keys(text)
            return False
        time.sleep(1)
        return clickable(d, test_id).get_attribute("value") == text

    wait_for(driver, holds, f"{text!r} to stay in {test_id}")
    clickable(driver, test_id).send_keys(Keys.TAB)


def create_flow(server: LangflowServer, user: ServerUser, flow: dict[str, Any]) -> str:
    with server.client(token=user.token) as client:
        created = client.post("/api/v1/flows/", json=flow)
    assert created.status_code == 201, created.text[:2000]
    return created.json()["id"]


def one_node_flow(
    server: LangflowServer,
    user: ServerUser,
    component_type: str,
    *,
    name: str,
    viewport_y: int,
    **fields: dict[str, Any],
) -> str:
    """A new flow holding one of this bundle's components as the sidebar adds it (the node `/api/v1/all` serves, an
    id as the canvas makes), with `fields` changed in its template."""
    with server.client(token=user.token) as client:
        node = client.get("/api/v1/all").raise_for_status().json()["summarizing_agent"][component_type]
    for field, changes in fields.items():
        node["template"][field].update(changes)
    node_id = f"{component_type}-Cnv4s"
    flow_node = {
        "id": node_id,
        "type": "genericNode",
        "position": {"x": 300, "y": 40},
        "data": {"id": node_id, "type": component_type, "node": node, "showNode": True},
    }
    data = {"nodes": [flow_node], "edges": [], "viewport": {"x": 0, "y": viewport_y, "zoom": 1}}
    return create_flow(server, user, {"name": name, "data": data})


def saved_template(server: LangflowServer, user: ServerUser, flow_id: str, component_type: str) -> dict[str, Any]:
    """The template of the flow's node of `component_type`, as the canvas last saved it; empty before it is saved."""
    with server.client(token=user.token) as client:
        flow = client.get(f"/api/v1/flows/{flow_id}").raise_for_status().json()
    nodes = [node for node in flow["data"]["nodes"] if node["data"]["type"] == component_type]
    return nodes[0]["data"]["node"]["template"] if nodes else {}


def wait_until_saved(
    server: LangflowServer,
    user: ServerUser,
    flow_id: str,
    component_type: str,
    saved: Callable[[dict[str, Any]], bool],
    what: str,
) -> dict[str, Any]:
    """The node's saved template once `saved` accepts it (the canvas saves a moment after an edit)."""
    deadline = time.monotonic() + SAVE_WAIT_SECONDS
    template: dict[str, Any] = {}
    while time.monotonic() < deadline:
        template = saved_template(server, user, flow_id, component_type)
        if template and saved(template):
            return template
        time.sleep(0.5)
    pytest.fail(f"the canvas did not save {what} within {SAVE_WAIT_SECONDS} s")


def replies(driver: WebDriver) -> list[WebElement]:
    return [
        m
        for m in driver.find_elements(*by_test_id("div-chat-message"))
        if "Noted." in m.text or m.text.startswith((COMPACT_REPLY_PREFIX, COMPACT_FAILED_PREFIX))
    ]


def send(driver: WebDriver, text: str, replies_before: int) -> None:
    box = clickable(driver, "input-chat-playground")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)
    wait_for(
        driver,
        lambda d: len(replies(d)) > replies_before and d.find_elements(*by_test_id("button-send")),
        f"a reply to {text!r}",
        TURN_WAIT_SECONDS,
    )
    wait_for(driver, lambda d: clickable(d, "input-chat-playground").is_enabled(), "the chat input to be ready")


def session_ids(server: LangflowServer, user: ServerUser, flow_id: str) -> set[str]:
    with server.client(token=user.token) as client:
        messages = client.get("/api/v1/monitor/messages", params={"flow_id": flow_id}).raise_for_status().json()
    return {message["session_id"] for message in messages}


def state_status(server: LangflowServer, user: ServerUser, flow_id: str, session_id: str) -> int:
    with server.client(token=user.token) as client:
        response = client.get(f"/api/v1/summarizing-agent/sessions/{session_id}/summary", params={"flow_id": flow_id})
    return response.status_code
