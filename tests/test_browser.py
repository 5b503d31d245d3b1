"""The Summarizing Agent on Langflow's canvas, in headless Chromium against the shared real server.

Found in the sidebar search, added to a flow, its Pinned Keys field appears only once Summarize Older Messages is
switched on (a round trip through the component's `update_build_config` on the server), and the flow saves it.
Elements are found by the `data-testid` attributes of Langflow's frontend. A screenshot of the result is kept in
`test-artifacts/` (a failure leaves one too).

Uses the system's Chromium and chromedriver (Debian `chromium`, `chromium-driver`); Selenium Manager is never asked to
download a browser or driver.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from tests.flow_files import AGENT_TYPE
from tests.postgres_database import running_in_ci
from tests.server_fixtures import LangflowServer, ServerUser

ARTIFACTS_DIR = Path(__file__).resolve().parent.parent / "test-artifacts"
SCREENSHOT = ARTIFACTS_DIR / "summarizing-agent-pinned-keys.png"
FAILURE_SCREENSHOT = ARTIFACTS_DIR / "summarizing-agent-canvas-failure.png"
WAIT_SECONDS = 45
SAVE_WAIT_SECONDS = 20
CHROMIUM_ARGUMENTS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1600,1000",
)


def _system_binary(*names: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    reason = f"{' or '.join(names)} is not installed (Debian: apt-get install chromium chromium-driver)"
    if running_in_ci():
        pytest.fail(f"CI=true needs the browser test: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM_BINARY") or _system_binary("chromium", "chromium-browser")
    for argument in CHROMIUM_ARGUMENTS:
        options.add_argument(argument)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    # A driver path of our own keeps Selenium Manager (which would download one) out of it.
    service = webdriver.ChromeService(executable_path=os.environ.get("CHROMEDRIVER") or _system_binary("chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _by_test_id(test_id: str) -> tuple[str, str]:
    return By.CSS_SELECTOR, f"[data-testid='{test_id}']"


def _clickable(driver: WebDriver, test_id: str) -> WebElement:
    return WebDriverWait(driver, WAIT_SECONDS).until(expected_conditions.element_to_be_clickable(_by_test_id(test_id)))


def _visible(driver: WebDriver, test_id: str) -> WebElement:
    locator = _by_test_id(test_id)
    return WebDriverWait(driver, WAIT_SECONDS).until(expected_conditions.visibility_of_element_located(locator))


def _present(driver: WebDriver, test_id: str) -> bool:
    return bool(driver.find_elements(*_by_test_id(test_id)))


def _click_in_panel(driver: WebDriver, test_id: str) -> None:
    # The parameters panel scrolls; a button below its fold is not clickable until scrolled into view.
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", driver.find_element(*_by_test_id(test_id)))
    _clickable(driver, test_id).click()


def _log_in(driver: WebDriver, server: LangflowServer, user: ServerUser) -> None:
    driver.get(f"{server.base_url}/login")
    username = WebDriverWait(driver, WAIT_SECONDS).until(
        expected_conditions.visibility_of_element_located((By.NAME, "username"))
    )
    username.send_keys(user.username)
    driver.find_element(By.CSS_SELECTOR, "input[type='password']").send_keys(user.password, Keys.ENTER)
    WebDriverWait(driver, WAIT_SECONDS).until(lambda d: "/login" not in d.current_url)


def _empty_flow(server: LangflowServer, user: ServerUser) -> str:
    with server.client(token=user.token) as client:
        created = client.post(
            "/api/v1/flows/",
            json={"name": "Browser test", "data": {"nodes": [], "edges": [], "viewport": {"x": 0, "y": 0, "zoom": 1}}},
        )
    assert created.status_code == 201, created.text
    return created.json()["id"]


def _saved_agent_template(server: LangflowServer, user: ServerUser, flow_id: str) -> dict[str, Any] | None:
    with server.client(token=user.token) as client:
        flow = client.get(f"/api/v1/flows/{flow_id}").raise_for_status().json()
    agents = [node for node in flow["data"]["nodes"] if node["data"]["type"] == AGENT_TYPE]
    return agents[0]["data"]["node"]["template"] if agents else None


def _wait_until_saved(server: LangflowServer, user: ServerUser, flow_id: str, pinned_key: str) -> dict[str, Any]:
    deadline = time.monotonic() + SAVE_WAIT_SECONDS
    template = None
    while time.monotonic() < deadline:
        template = _saved_agent_template(server, user, flow_id)
        if template and template["pinned_keys"].get("value") == [pinned_key]:
            return template
        time.sleep(0.5)
    pytest.fail(f"the canvas did not save Pinned Keys [{pinned_key!r}] within {SAVE_WAIT_SECONDS} s; saved: {template}")


def test_pinned_keys_appear_on_the_canvas_when_the_switch_is_turned_on(
    browser: WebDriver, langflow_server: LangflowServer
) -> None:
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    user = langflow_server.create_user()
    flow_id = _empty_flow(langflow_server, user)
    try:
        _log_in(browser, langflow_server, user)
        browser.get(f"{langflow_server.base_url}/flow/{flow_id}")

        search = _clickable(browser, "sidebar-search-input")
        search.send_keys("Summarizing Agent")
        # Sidebar entries are `<category><display name>`; our bundle is the category.
        entry = _visible(browser, "summarizing_agentSummarizing Agent")
        ActionChains(browser).move_to_element(entry).perform()
        _clickable(browser, "add-component-button-summarizing-agent").click()
        _visible(browser, "title-Summarizing Agent")

        _clickable(browser, "parameters-button").click()
        _visible(browser, "inspector-param-summarize_older_messages")
        assert not _present(browser, "inspector-param-pinned_keys"), "Pinned Keys shown while the switch is off"

        _click_in_panel(browser, "inspector-add-summarize_older_messages")
        switch = _clickable(browser, "toggle_bool_summarize_older_messages")
        assert switch.get_attribute("aria-checked") == "false"
        switch.click()
        WebDriverWait(browser, WAIT_SECONDS).until(
            lambda d: (
                d.find_element(*_by_test_id("toggle_bool_summarize_older_messages")).get_attribute("aria-checked")
                == "true"
            )
        )
        _visible(browser, "inspector-param-pinned_keys")

        _click_in_panel(browser, "inspector-add-pinned_keys")
        _clickable(browser, "inputlist_str_pinned_keys_0").send_keys("project_id")
        _clickable(browser, "inspection-panel-close").click()
        browser.save_screenshot(str(SCREENSHOT))
    except Exception:
        browser.save_screenshot(str(FAILURE_SCREENSHOT))
        raise

    saved = _wait_until_saved(langflow_server, user, flow_id, "project_id")
    assert saved["summarize_older_messages"]["value"] is True
    assert saved["pinned_keys"]["show"] is True
