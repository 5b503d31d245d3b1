"""The Summarizing Agent as a user meets it in Langflow's UI: headless Chromium against the shared real server.

1. Found in the sidebar search and added to a flow, the node shows Summarize Older Messages switched on and Pinned
   Keys, and the flow saves what is typed there.
2. In the Playground of the ready flow (with the offline model), 15 messages in a new session: once folds have
   happened the reply shows the memory step, no summary text is on the page, `/compact` answers, and deleting the
   session from the Playground's session menu drops its summary.

Elements are found by the `data-testid` attributes of Langflow's frontend. Screenshots of the node and of the
Playground with the memory step open are written to `test-artifacts/`, or, with `--update-screenshots`, to
`docs/screenshots/` (the README shows them); a failure leaves one in `test-artifacts/`.

Helpers and the browser: `tests/support/browser.py`, `tests/browser/conftest.py`.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from langflow_summarizing_agent.engine.plan import COMPACT_REPLY_PREFIX
from langflow_summarizing_agent.engine.prompt import SUMMARY_PREFIX
from langflow_summarizing_agent.wiring.agent_turn import MEMORY_STEP_TITLE
from tests.support.browser import (
    by_test_id,
    click,
    clickable,
    create_flow,
    new_chat,
    replies,
    screenshot_on_failure,
    send,
    session_ids,
    state_status,
    type_until_it_holds,
    visible,
    wait_for,
    wait_until_saved,
)
from tests.support.flow_files import (
    AGENT_TYPE,
    load_memory_chatbot_flow,
    load_support_flow,
    memory_chatbot_offline,
    node_of_type,
    read_records,
    with_offline_model,
)
from tests.support.server_chat import summary_rows
from tests.support.server_fixtures import LangflowServer, ServerUser

pytestmark = pytest.mark.browser

NODE_SCREENSHOT = "summarizing-agent-node.png"
PLAYGROUND_SCREENSHOT = "playground-memory-step.png"
CHAT_MESSAGES = 15
CLEARED_CHAT_MESSAGES = 6
FOLD_SECONDS = 3
COVERED = re.compile(r"summary covers (\d+) earlier messages")
OPENING = "Hello, this is customer Initech. Our project PRJ-456 on the US cluster fails to deploy since this morning."


def test_a_dropped_agent_shows_the_switch_on_and_pinned_keys_on_the_node(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser, screenshots_dir: Path
) -> None:
    browser = logged_in
    empty = {"name": "Browser test", "data": {"nodes": [], "edges": [], "viewport": {"x": 0, "y": 0, "zoom": 1}}}
    flow_id = create_flow(langflow_server, user, empty)
    try:
        browser.get(f"{langflow_server.base_url}/flow/{flow_id}")
        search = clickable(browser, "sidebar-search-input")
        search.send_keys("Summarizing Agent")

        def added(d: WebDriver) -> bool:
            # Sidebar entries are `<category><display name>`; our bundle is the category. The list re-renders while
            # the search settles: an entry gone stale is looked up again.
            ActionChains(d).move_to_element(visible(d, "summarizing_agentSummarizing Agent")).perform()
            clickable(d, "add-component-button-summarizing-agent").click()
            return True

        wait_for(browser, added, "the Summarizing Agent added from the sidebar")
        visible(browser, "title-Summarizing Agent")

        # On the node itself, without opening the Parameters panel.
        # The node re-renders once its template loads: read the switch afresh until it answers.
        checked = wait_for(
            browser,
            lambda d: visible(d, "toggle_bool_summarize_older_messages").get_attribute("aria-checked"),
            "the switch Summarize Older Messages",
        )
        assert checked == "true"
        type_until_it_holds(browser, "inputlist_str_pinned_keys_0", "project_id")
        node_of_title = "./ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' react-flow__node ')]"
        wait_for(
            browser,
            lambda d: (
                visible(d, "title-Summarizing Agent")
                .find_element(By.XPATH, node_of_title)
                .screenshot(str(screenshots_dir / NODE_SCREENSHOT))
            ),
            "a screenshot of the node",
        )
    except Exception:
        screenshot_on_failure(browser, "summarizing-agent-node-failure.png")
        raise

    saved = wait_until_saved(
        langflow_server,
        user,
        flow_id,
        AGENT_TYPE,
        lambda template: template["pinned_keys"].get("value") == ["project_id"],
        "Pinned Keys ['project_id']",
    )
    assert saved["summarize_older_messages"]["value"] is True
    assert saved["pinned_keys"]["advanced"] is False


def _open_last_step(driver: WebDriver) -> None:
    """Open the last reply's memory step: an item of the reply's expandable steps, as tool calls are; the Playground
    writes their titles in capitals."""
    step_title = f"//*[normalize-space(text())='{MEMORY_STEP_TITLE.upper()}']"
    steps = wait_for(driver, lambda d: d.find_elements(By.XPATH, step_title), "the memory steps")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", steps[-1])
    steps[-1].click()


def _last_step_items(driver: WebDriver) -> list[str]:
    """The items of the last memory step opened, one list item each, once it has slid open: Selenium reads a hidden
    item's text as empty, so every item must read some."""
    step_text = "//*[starts-with(normalize-space(.), 'Memory:')][.//li]"

    def shown_items(d: WebDriver) -> list[str]:
        found = d.find_elements(By.XPATH, step_text)
        items = [item.text for item in found[-1].find_elements(By.TAG_NAME, "li")] if found else []
        return items if all(items) else []

    return wait_for(driver, shown_items, "the memory step's items")


def _session_menu(driver: WebDriver, session_id: str, option: str) -> None:
    """Pick `option` in the Playground's menu of the session."""
    menu = driver.find_element(*by_test_id(f"session-{session_id}-more-menu"))
    selector = menu.find_element(By.XPATH, "./ancestor::*[@data-testid='session-selector']")
    ActionChains(driver).move_to_element(selector).perform()
    click(driver, f"session-{session_id}-more-menu")
    click(driver, option)


def test_the_playground_shows_the_memory_step_and_deleting_the_session_drops_its_summary(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser, tmp_path: Path, screenshots_dir: Path
) -> None:
    browser = logged_in
    flow = with_offline_model(load_support_flow(), tmp_path / "calls.jsonl", n_messages=4, fold_batch=4)
    flow_id = create_flow(langflow_server, user, flow)
    try:
        browser.get(f"{langflow_server.base_url}/flow/{flow_id}")
        click(browser, "playground-btn-flow-io")
        new_chat(browser)

        for turn in range(CHAT_MESSAGES):
            text = OPENING if turn == 0 else f"Step {turn}: I restarted the deployment and it still fails."
            send(browser, text, turn)

        [session_id] = session_ids(langflow_server, user, flow_id) - {flow_id}
        [state] = summary_rows(langflow_server, flow_id, session_id)
        assert state["absorbed_count"] > 0
        # Each reply's memory step is an item of the reply's expandable steps, as tool calls are; the Playground writes
        # their titles in capitals.
        _open_last_step(browser)
        # The step's text is in the page before it is shown (it slides open); Selenium reads only shown text, so the
        # step is read once every item shows. One item a line: the step's Markdown list.
        items = _last_step_items(browser)
        opened_text = "\n".join(items)
        # The step tells what the last turn's model got; the fold after that reply may have folded more since.
        covered = COVERED.search(opened_text)
        assert covered is not None, opened_text
        assert 0 < int(covered.group(1)) <= state["absorbed_count"]
        assert "pinned: project_id" in opened_text
        assert "PRJ-456" not in opened_text
        page = browser.find_element(By.TAG_NAME, "body").text
        assert SUMMARY_PREFIX not in page
        assert "Pinned facts" not in page
        assert items[0] == covered.group(0)
        assert any(item.startswith("pinned: ") for item in items)
        assert items[-1].startswith("~") and "the whole conversation verbatim: ~" in items[-1]
        browser.save_screenshot(str(screenshots_dir / PLAYGROUND_SCREENSHOT))

        send(browser, "/compact", CHAT_MESSAGES)
        compacted = wait_for(browser, lambda d: replies(d)[-1].text, "the /compact reply")
        assert compacted.count(COMPACT_REPLY_PREFIX) == 1
        assert "PRJ-456" not in compacted

        _session_menu(browser, session_id, "delete-session-option")
        wait_for(
            browser,
            lambda _: session_id not in session_ids(langflow_server, user, flow_id),
            "the session's messages to be deleted",
        )
    except Exception:
        screenshot_on_failure(browser, "playground-memory-step-failure.png")
        raise

    assert summary_rows(langflow_server, flow_id, session_id) == []
    assert state_status(langflow_server, user, flow_id, session_id) == 404


def test_the_memory_chatbot_playground_shows_no_summary_and_its_model_got_the_summary_and_the_window(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser, tmp_path: Path
) -> None:
    browser = logged_in
    record_path = tmp_path / "calls.jsonl"
    flow_id = create_flow(
        langflow_server, user, memory_chatbot_offline(load_memory_chatbot_flow(), record_path, n_messages=4)
    )
    try:
        browser.get(f"{langflow_server.base_url}/flow/{flow_id}")
        click(browser, "playground-btn-flow-io")
        new_chat(browser)
        texts = [OPENING, *(f"Step {turn}: I restarted the deployment and it still fails." for turn in range(1, 15))]
        for turn, text in enumerate(texts):
            send(browser, text, turn)

        [session_id] = session_ids(langflow_server, user, flow_id) - {flow_id}
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
        screenshot_on_failure(browser, "memory-chatbot-playground-failure.png")
        raise


def test_a_cleared_chat_starts_again_with_no_report_of_the_cleared_conversations_folds(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser, tmp_path: Path
) -> None:
    """The Playground's Default Session (its id is the flow's) can be cleared: its messages go, and with them its
    summary and the report of the fold after its last reply."""
    browser = logged_in
    flow = with_offline_model(load_support_flow(), tmp_path / "calls.jsonl", n_messages=4, fold_batch=2)
    # Each fold takes a while, so the fold after the last reply still runs when the chat is cleared.
    node_of_type(flow, "FakeChatModel")["data"]["node"]["template"]["fold_delay"]["value"] = FOLD_SECONDS
    flow_id = create_flow(langflow_server, user, flow)
    try:
        browser.get(f"{langflow_server.base_url}/flow/{flow_id}")
        click(browser, "playground-btn-flow-io")
        for turn in range(CLEARED_CHAT_MESSAGES):
            send(browser, OPENING if turn == 0 else f"Step {turn}: it still fails.", turn)
            time.sleep(FOLD_SECONDS)
        _open_last_step(browser)
        assert any(item.startswith("folded after the previous reply") for item in _last_step_items(browser))
        send(browser, "One more step: still failing.", CLEARED_CHAT_MESSAGES)

        # The Default Session's "Clear session" is the menu item other sessions call "Delete session".
        _session_menu(browser, flow_id, "delete-session-option")
        wait_for(
            browser,
            lambda _: flow_id not in session_ids(langflow_server, user, flow_id),
            "the session's messages to be cleared",
        )
        time.sleep(FOLD_SECONDS)  # the fold of the cleared conversation ends
        send(browser, "Hello again: the deployment works now.", 0)
        _open_last_step(browser)
        items = _last_step_items(browser)
    except Exception:
        screenshot_on_failure(browser, "playground-cleared-chat-failure.png")
        raise

    assert items[0] == "no summary yet"
    assert not any("previous reply" in item for item in items), items
