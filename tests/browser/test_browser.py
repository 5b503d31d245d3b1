"""The Summarizing Agent as a user meets it in Langflow's UI: headless Chromium against the shared real server.

1. Found in the sidebar search and added to a flow, the node shows Summarize Older Messages switched on and Pinned
   Keys, and the flow saves what is typed there.
2. In the Playground of the ready flow (with the offline model), 15 messages in a new session: once folds have
   happened the reply shows the memory step, no summary text is on the page, `/compact` answers, and deleting the
   session from the Playground's session menu drops its summary.

Elements are found by the `data-testid` attributes of Langflow's frontend. Screenshots of the node and of the
Playground with the memory step open are written to `docs/screenshots/` (the README shows them); a failure leaves one
in `test-artifacts/`.

Uses the system's Chromium and chromedriver (Debian `chromium`, `chromium-driver`); Selenium Manager is never asked to
download a browser or driver.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import ElementClickInterceptedException, StaleElementReferenceException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from langflow_summarizing_agent.engine.plan import COMPACT_REPLY_PREFIX
from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX
from langflow_summarizing_agent.wiring.agent_turn import MEMORY_STEP_TITLE
from tests.support.flow_files import (
    AGENT_TYPE,
    load_memory_chatbot_flow,
    load_support_flow,
    memory_chatbot_offline,
    read_records,
    with_offline_model,
)
from tests.support.postgres_database import running_in_ci
from tests.support.server_chat import summary_rows
from tests.support.server_fixtures import LangflowServer, ServerUser

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS_DIR = ROOT / "test-artifacts"
SCREENSHOTS_DIR = ROOT / "docs" / "screenshots"
NODE_SCREENSHOT = SCREENSHOTS_DIR / "summarizing-agent-node.png"
PLAYGROUND_SCREENSHOT = SCREENSHOTS_DIR / "playground-memory-step.png"
WAIT_SECONDS = 45
TURN_WAIT_SECONDS = 90
SAVE_WAIT_SECONDS = 20
CHAT_MESSAGES = 15
STEP_TEXT = "//*[starts-with(normalize-space(.), 'Memory: summary covers')]"
COVERED = re.compile(r"summary covers (\d+) earlier messages")
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
OPENING = "Hello, this is customer Initech. Our project PRJ-456 on the US cluster fails to deploy since this morning."


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


@pytest.fixture(scope="module")
def user(langflow_server: LangflowServer) -> ServerUser:
    return langflow_server.create_user()


@pytest.fixture(scope="module")
def logged_in(browser: WebDriver, langflow_server: LangflowServer, user: ServerUser) -> WebDriver:
    browser.get(f"{langflow_server.base_url}/login")
    username = WebDriverWait(browser, WAIT_SECONDS).until(
        expected_conditions.visibility_of_element_located((By.NAME, "username"))
    )
    username.send_keys(user.username)
    browser.find_element(By.CSS_SELECTOR, "input[type='password']").send_keys(user.password, Keys.ENTER)
    WebDriverWait(browser, WAIT_SECONDS).until(lambda d: "/login" not in d.current_url)
    return browser


def _by_test_id(test_id: str) -> tuple[str, str]:
    return By.CSS_SELECTOR, f"[data-testid='{test_id}']"


def _clickable(driver: WebDriver, test_id: str) -> WebElement:
    return WebDriverWait(driver, WAIT_SECONDS).until(expected_conditions.element_to_be_clickable(_by_test_id(test_id)))


def _visible(driver: WebDriver, test_id: str) -> WebElement:
    locator = _by_test_id(test_id)
    return WebDriverWait(driver, WAIT_SECONDS).until(expected_conditions.visibility_of_element_located(locator))


def _wait_for(
    driver: WebDriver, condition: Callable[[WebDriver], Any], what: str, seconds: float = WAIT_SECONDS
) -> Any:
    # The chat re-renders while a reply streams in: an element found a moment ago may be gone; look again.
    wait = WebDriverWait(driver, seconds, ignored_exceptions=(StaleElementReferenceException,))
    return wait.until(condition, message=what)


def _click(driver: WebDriver, test_id: str) -> None:
    """Click once the element takes the click: panels slide in, and a click meanwhile lands on what covers it."""

    def clicked(d: WebDriver) -> bool:
        _clickable(d, test_id).click()
        return True

    wait = WebDriverWait(driver, WAIT_SECONDS, ignored_exceptions=(ElementClickInterceptedException,))
    wait.until(clicked, message=f"a click on {test_id}")


NEW_SESSION = "//*[starts-with(normalize-space(text()), 'New Session')]"
"""The Playground's name for the session a click on "+" opens, in the sessions list and the chat's header."""


def _new_chat(driver: WebDriver) -> None:
    """Open a new session in the Playground, clicking "+" again while it shows none: a click while the Playground
    still loads the flow's sessions is lost, and the chat would go to the Default Session."""

    def opened(d: WebDriver) -> bool:
        if d.find_elements(By.XPATH, NEW_SESSION):
            return True
        try:
            _clickable(d, "new-chat").click()
        except ElementClickInterceptedException:
            return False
        return bool(d.find_elements(By.XPATH, NEW_SESSION))

    _wait_for(driver, opened, "a new session in the Playground")


def _screenshot_on_failure(driver: WebDriver, name: str) -> None:
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS_DIR / name))
    (ARTIFACTS_DIR / name).with_suffix(".html").write_text(driver.page_source, encoding="utf-8")


def _type_until_it_holds(driver: WebDriver, test_id: str, text: str) -> None:
    """Type `text` into an empty field and leave it; again if the node, still refreshing from the server, resets it."""

    def holds(d: WebDriver) -> bool:
        field = _clickable(d, test_id)
        if field.get_attribute("value") != text:
            field.clear()
            field.send_keys(text)
            return False
        time.sleep(1)
        return _clickable(d, test_id).get_attribute("value") == text

    _wait_for(driver, holds, f"{text!r} to stay in {test_id}")
    _clickable(driver, test_id).send_keys(Keys.TAB)


def _create_flow(server: LangflowServer, user: ServerUser, flow: dict[str, Any]) -> str:
    with server.client(token=user.token) as client:
        created = client.post("/api/v1/flows/", json=flow)
    assert created.status_code == 201, created.text[:2000]
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


def test_a_dropped_agent_shows_the_switch_on_and_pinned_keys_on_the_node(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser
) -> None:
    browser = logged_in
    empty = {"name": "Browser test", "data": {"nodes": [], "edges": [], "viewport": {"x": 0, "y": 0, "zoom": 1}}}
    flow_id = _create_flow(langflow_server, user, empty)
    try:
        browser.get(f"{langflow_server.base_url}/flow/{flow_id}")
        search = _clickable(browser, "sidebar-search-input")
        search.send_keys("Summarizing Agent")
        # Sidebar entries are `<category><display name>`; our bundle is the category.
        entry = _visible(browser, "summarizing_agentSummarizing Agent")
        ActionChains(browser).move_to_element(entry).perform()
        _clickable(browser, "add-component-button-summarizing-agent").click()
        title = _visible(browser, "title-Summarizing Agent")

        # On the node itself, without opening the Parameters panel.
        switch = _visible(browser, "toggle_bool_summarize_older_messages")
        assert switch.get_attribute("aria-checked") == "true"
        _type_until_it_holds(browser, "inputlist_str_pinned_keys_0", "project_id")
        node = title.find_element(
            By.XPATH, "./ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' react-flow__node ')]"
        )
        SCREENSHOTS_DIR.mkdir(parents=True, exist_ok=True)
        node.screenshot(str(NODE_SCREENSHOT))
    except Exception:
        _screenshot_on_failure(browser, "summarizing-agent-node-failure.png")
        raise

    saved = _wait_until_saved(langflow_server, user, flow_id, "project_id")
    assert saved["summarize_older_messages"]["value"] is True
    assert saved["pinned_keys"]["advanced"] is False


def _replies(driver: WebDriver) -> list[WebElement]:
    return [
        m
        for m in driver.find_elements(*_by_test_id("div-chat-message"))
        if "Noted." in m.text or COMPACT_REPLY_PREFIX in m.text
    ]


def _send(driver: WebDriver, text: str, replies_before: int) -> None:
    box = _clickable(driver, "input-chat-playground")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)
    _wait_for(
        driver,
        lambda d: len(_replies(d)) > replies_before and d.find_elements(*_by_test_id("button-send")),
        f"a reply to {text!r}",
        TURN_WAIT_SECONDS,
    )
    _wait_for(driver, lambda d: _clickable(d, "input-chat-playground").is_enabled(), "the chat input to be ready")


def _session_ids(server: LangflowServer, user: ServerUser, flow_id: str) -> set[str]:
    with server.client(token=user.token) as client:
        messages = client.get("/api/v1/monitor/messages", params={"flow_id": flow_id}).raise_for_status().json()
    return {message["session_id"] for message in messages}


def _state_status(server: LangflowServer, user: ServerUser, flow_id: str, session_id: str) -> int:
    with server.client(token=user.token) as client:
        response = client.get(f"/api/v1/summarizing-agent/sessions/{session_id}/summary", params={"flow_id": flow_id})
    return response.status_code


def test_the_playground_shows_the_memory_step_and_deleting_the_session_drops_its_summary(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser, tmp_path: Path
) -> None:
    browser = logged_in
    flow = with_offline_model(load_support_flow(), tmp_path / "calls.jsonl", n_messages=4, fold_batch=4)
    flow_id = _create_flow(langflow_server, user, flow)
    try:
        browser.get(f"{langflow_server.base_url}/flow/{flow_id}")
        _click(browser, "playground-btn-flow-io")
        _new_chat(browser)

        for turn in range(CHAT_MESSAGES):
            text = OPENING if turn == 0 else f"Step {turn}: I restarted the deployment and it still fails."
            _send(browser, text, turn)

        [session_id] = _session_ids(langflow_server, user, flow_id) - {flow_id}
        [state] = summary_rows(langflow_server, flow_id, session_id)
        assert state["absorbed_count"] > 0
        # Each reply's memory step is an item of the reply's expandable steps, as tool calls are; the Playground writes
        # their titles in capitals.
        step_title = f"//*[normalize-space(text())='{MEMORY_STEP_TITLE.upper()}']"
        steps = _wait_for(browser, lambda d: d.find_elements(By.XPATH, step_title), "the memory steps")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", steps[-1])
        steps[-1].click()
        # The step's text is in the page before it is shown (it slides open); Selenium reads only shown text.
        opened_text = _wait_for(
            browser,
            lambda d: [
                text for element in d.find_elements(By.XPATH, STEP_TEXT) if COVERED.search(text := element.text)
            ],
            "the memory step to open",
        )[-1]
        # The step tells what the last turn's model got; the fold after that reply may have folded more since.
        covered = COVERED.search(opened_text)
        assert covered is not None, opened_text
        assert 0 < int(covered.group(1)) <= state["absorbed_count"]
        assert "pinned: project_id" in opened_text
        assert "PRJ-456" not in opened_text
        page = browser.find_element(By.TAG_NAME, "body").text
        assert SUMMARY_PREFIX not in page
        assert "Pinned facts" not in page
        SCREENSHOTS_DIR.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(PLAYGROUND_SCREENSHOT))

        _send(browser, "/compact", CHAT_MESSAGES)
        compacted = _wait_for(browser, lambda d: _replies(d)[-1].text, "the /compact reply")
        assert compacted.count(COMPACT_REPLY_PREFIX) == 1
        assert "PRJ-456" not in compacted

        menu = browser.find_element(*_by_test_id(f"session-{session_id}-more-menu"))
        selector = menu.find_element(By.XPATH, "./ancestor::*[@data-testid='session-selector']")
        ActionChains(browser).move_to_element(selector).perform()
        _click(browser, f"session-{session_id}-more-menu")
        _click(browser, "delete-session-option")
        _wait_for(
            browser,
            lambda _: session_id not in _session_ids(langflow_server, user, flow_id),
            "the session's messages to be deleted",
        )
    except Exception:
        _screenshot_on_failure(browser, "playground-memory-step-failure.png")
        raise

    assert summary_rows(langflow_server, flow_id, session_id) == []
    assert _state_status(langflow_server, user, flow_id, session_id) == 404


def test_the_memory_chatbot_playground_shows_no_summary_and_its_model_got_the_summary_and_the_window(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser, tmp_path: Path
) -> None:
    browser = logged_in
    record_path = tmp_path / "calls.jsonl"
    flow_id = _create_flow(
        langflow_server, user, memory_chatbot_offline(load_memory_chatbot_flow(), record_path, n_messages=4)
    )
    try:
        browser.get(f"{langflow_server.base_url}/flow/{flow_id}")
        _click(browser, "playground-btn-flow-io")
        _new_chat(browser)
        texts = [OPENING, *(f"Step {turn}: I restarted the deployment and it still fails." for turn in range(1, 15))]
        for turn, text in enumerate(texts):
            _send(browser, text, turn)

        [session_id] = _session_ids(langflow_server, user, flow_id) - {flow_id}
        [state] = summary_rows(langflow_server, flow_id, session_id)
        assert state["absorbed_count"] > 0
        prompt = [r for r in read_records(record_path) if r["kind"] == "agent"][-1]["messages"][-1]["content"]
        assert SUMMARY_PREFIX in prompt
        assert "- project_id: PRJ-456" in prompt
        # The window: the previous exchange word for word, then the new message. Chat Input and the history build in
        # the same layer of the flow, so the history may read the new message too, as the stock one does.
        assert f"User: {texts[-2]}\nAI: Noted." in prompt
        assert prompt.endswith(f"The customer's new message: {texts[-1]}")
        page = browser.find_element(By.TAG_NAME, "body").text
        assert SUMMARY_PREFIX not in page
        assert "Pinned facts" not in page
        assert "project_id" not in page
    except Exception:
        _screenshot_on_failure(browser, "memory-chatbot-playground-failure.png")
        raise
