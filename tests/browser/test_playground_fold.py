"""The fold after the reply in a flow built on the canvas: headless Chromium against the shared real server, whose
OpenAI models send to the loopback provider server (`tests.support.provider_servers`).

A user creates a blank flow, adds Chat Input, the Summarizing Agent and Chat Output from the sidebar's search, connects
them handle to handle, connects OpenAI with an API key in the model picker and picks gpt-4o-mini, pastes a support
policy at the end of the Agent Instructions, adds Number of Chat History Messages, Fold Batch and History Token Budget
to the node from its Parameters panel and types 3, 2 and 0, then chats in the Playground. What the provider received:
once it reported a cache read, every fold after a reply asks on the agent's prefix (the agent's call just before it,
then the fold instruction), with the same tools, served from the cache.

The policy makes the agent's prompt longer than the 1,024 tokens OpenAI caches at least; the default instructions and
the two default tools come to about 850.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.browser import (
    TURN_WAIT_SECONDS,
    by_test_id,
    click,
    clickable,
    screenshot_on_failure,
    session_ids,
    visible,
    wait_for,
    wait_until_saved,
)
from tests.support.flow_files import AGENT_TYPE
from tests.support.provider_servers import Providers, Recorded
from tests.support.server_fixtures import LangflowServer, ServerUser

pytestmark = pytest.mark.browser

OPENAI_KEY_VARIABLE = "OPENAI_API_KEY"
"""The global variable Langflow's Model providers dialog saves the typed key in, for the user."""
MODEL = "gpt-4o-mini"
POLICY_RULES = (
    "Greet the customer by name, restate the project id, the cluster and the error the customer reports, ask for "
    "the deployment log when none was pasted, never promise a refund, and end every answer with the next step the "
    "customer should take. "
)
POLICY = "\n\n# Support policy\n" + POLICY_RULES * 4
NUMBERS = {"n_messages": 3, "fold_batch": 2, "history_token_budget": 0}
MESSAGES = (
    "Hello, this is Initech. Our project PRJ-7 fails to deploy on the US cluster.",
    *(f"Step {step}: I restarted the deployment of PRJ-7 and it still fails." for step in range(1, 5)),
)
RECLICK_SECONDS = 5
"""How long a model's switch in the Model providers dialog may take to show on before it is clicked again."""
NODE_SPACING = 450
"""How far Chat Input and Chat Output are dragged from the agent, which the sidebar adds at the same place."""


@pytest.fixture
def openai_key_removed_after(langflow_server: LangflowServer, user: ServerUser) -> Iterator[None]:
    """The key typed into the Model providers dialog stays the user's: removed after the test, so that the other
    browser tests, which share the user, find no provider connected."""
    yield
    with langflow_server.client(token=user.token) as client:
        for variable in client.get("/api/v1/variables/").raise_for_status().json():
            if variable["name"] == OPENAI_KEY_VARIABLE:
                client.delete(f"/api/v1/variables/{variable['id']}").raise_for_status()


def test_a_canvas_built_flow_folds_on_the_agents_prefix_after_each_reply_once_the_provider_caches(
    logged_in: WebDriver,
    langflow_server: LangflowServer,
    user: ServerUser,
    loopback_providers: Providers,
    openai_key_removed_after: None,
) -> None:
    browser = logged_in
    try:
        flow_id = _new_blank_flow(browser, langflow_server)
        _build_chat_flow(browser)
        _connect_openai_and_pick(browser, MODEL)
        _paste_at_the_end_of_the_instructions(browser, POLICY)
        for name in NUMBERS:
            _show_on_the_node(browser, name)
        click(browser, "inspection-panel-close")
        _see_the_whole_flow(browser)
        for name, value in NUMBERS.items():
            _type_and_leave(browser, f"int_int_{name}", str(value))
        template = wait_until_saved(
            langflow_server,
            user,
            flow_id,
            AGENT_TYPE,
            lambda t: (
                all(t[name]["value"] == value for name, value in NUMBERS.items())
                and [m["name"] for m in t["model"]["value"] or []] == [MODEL]
                and POLICY.strip() in t["system_prompt"]["value"]
            ),
            f"{MODEL}, the policy and {NUMBERS}",
        )

        start = len(loopback_providers.requests)
        click(browser, "playground-btn-flow-io")
        for text in MESSAGES:
            _say(browser, text)
    except Exception:
        screenshot_on_failure(browser, "playground-fold-failure.png")
        raise

    assert _edges(langflow_server, user, flow_id) == {("ChatInput", AGENT_TYPE), (AGENT_TYPE, "ChatOutput")}
    assert template["summarize_older_messages"]["value"] is True
    # The Playground's Default Session: its id is the flow's.
    assert session_ids(langflow_server, user, flow_id) == {flow_id}
    summary = _summary_after_the_running_folds(langflow_server, user, flow_id, flow_id)
    assert summary["absorbed_count"] > 0

    sent = [r for r in loopback_providers.requests[start:] if r.wire == "openai"]
    log = _log(sent)
    assert not sent[0].is_fold, log
    cached_at = next((i for i, r in enumerate(sent) if _cached(r) > 0), None)
    assert cached_at is not None, f"the provider never reported a cache read:\n{log}"
    folds = [i for i, r in enumerate(sent) if r.is_fold and i > cached_at]
    assert folds, f"no fold after the first cache read:\n{log}"
    for at in folds:
        fold, agent_call = sent[at], sent[at - 1]
        assert not agent_call.is_fold, log
        prefix = agent_call.body["messages"]
        assert fold.body["messages"][: len(prefix)] == prefix, f"the fold at {at} is not on the agent's prefix:\n{log}"
        assert fold.body.get("tools") == agent_call.body["tools"], log
        assert _cached(fold) > 0, log
    assert sent[-1].is_fold, f"no fold after the last reply:\n{log}"


def _new_blank_flow(driver: WebDriver, server: LangflowServer) -> str:
    """A new flow from the home page's New Flow and the welcome's Blank Flow; its id, from the canvas's address."""
    driver.get(f"{server.base_url}/")
    # "New Flow" once the user has flows, "Create first flow" before.
    wait_for(driver, lambda d: _click_shown(d, "new-project-btn", "new_project_btn_empty_page"), "New Flow")
    # The new flow's welcome, or the templates dialog, offers Blank Flow.
    wait_for(driver, lambda d: _click_shown(d, "flow-builder-welcome-blank-flow", "blank-flow"), "Blank Flow")
    return wait_for(driver, lambda d: "/flow/" in d.current_url and d.current_url.rsplit("/", 1)[1], "the flow's id")


def _click_shown(driver: WebDriver, *test_ids: str) -> bool:
    """Click the first of the elements shown; False when none is."""
    for test_id in test_ids:
        shown = [e for e in driver.find_elements(*by_test_id(test_id)) if e.is_displayed() and e.is_enabled()]
        if shown:
            shown[0].click()
            return True
    return False


def _build_chat_flow(driver: WebDriver) -> None:
    """Chat Input, the Summarizing Agent and Chat Output side by side, connected: a click on an output's handle,
    then one on an input's, as Langflow connects them."""
    if not driver.find_element(*by_test_id("sidebar-search-input")).is_displayed():
        click(driver, "components")  # the blank flow opens with the sidebar folded
    _add(driver, "input_output", "Chat Input")
    _drag_title(driver, "Chat Input", -NODE_SPACING)
    _add(driver, "summarizing_agent", "Summarizing Agent")
    _add(driver, "input_output", "Chat Output")
    _drag_title(driver, "Chat Output", NODE_SPACING)
    _see_the_whole_flow(driver)
    click(driver, "handle-chatinput-noshownode-chat message-source")
    click(driver, "handle-summarizingagentcomponent-shownode-input-left")
    click(driver, "handle-summarizingagentcomponent-shownode-response-right")
    click(driver, "handle-chatoutput-noshownode-inputs-target")
    wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".react-flow__edge")) == 2, "the two edges")


def _add(driver: WebDriver, category: str, name: str) -> None:
    """Search the sidebar for the component, hover its entry, click its "+": it lands in the middle of the canvas."""
    field = clickable(driver, "sidebar-search-input")
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(Keys.BACKSPACE)
    field.send_keys(name)
    # Sidebar entries are `<category><display name>`.
    ActionChains(driver).move_to_element(visible(driver, f"{category}{name}")).perform()
    click(driver, f"add-component-button-{name.lower().replace(' ', '-')}")
    visible(driver, f"title-{name}")


def _drag_title(driver: WebDriver, title: str, dx: int) -> None:
    # Small steps: React Flow starts a drag only after the pointer moves a few pixels while held.
    chain = ActionChains(driver, duration=50).click_and_hold(visible(driver, f"title-{title}"))
    for _ in range(10):
        chain.move_by_offset(dx // 10, 0)
    chain.release().perform()


def _see_the_whole_flow(driver: WebDriver) -> None:
    """Fit the flow in the canvas, and a step smaller: the canvas's controls cover the bottom of a fitted flow."""
    for action in ("fit_view", "zoom_out"):
        click(driver, "canvas_controls_dropdown")
        click(driver, action)
        ActionChains(driver).send_keys(Keys.ESCAPE).perform()


def _connect_openai_and_pick(driver: WebDriver, model: str) -> None:
    """In the agent's model picker: Setup Provider, OpenAI, the API key, Save; switch `model` on in the provider's
    list (it is not among the few on by default), close, and pick it."""

    def setup_clicked(d: WebDriver) -> bool:
        # The field's button before a provider is connected; it has no test id.
        d.find_element(By.CSS_SELECTOR, "button[aria-labelledby^='model_model-setup-provider-label']").click()
        return True

    clicked_at = [0.0]

    def switched_on(d: WebDriver) -> bool:
        # The switch saves before it shows on: click again only if it still shows off a while after.
        switch = visible(d, f"llm-toggle-{model}")
        if switch.get_attribute("aria-checked") == "true":
            return True
        if time.monotonic() - clicked_at[0] > RECLICK_SECONDS:
            d.execute_script("arguments[0].scrollIntoView({block: 'center'})", switch)
            switch.click()
            clicked_at[0] = time.monotonic()
        return False

    wait_for(driver, setup_clicked, "a click on Setup Provider")
    click(driver, "provider-item-OpenAI")
    clickable(driver, f"provider-variable-input-{OPENAI_KEY_VARIABLE}").send_keys("sk-typed-in-the-browser")
    click(driver, "provider-save-button")
    visible(driver, "provider-disconnect-button")  # saved: the provider is connected
    wait_for(driver, switched_on, f"{model} switched on")
    ActionChains(driver).send_keys(Keys.ESCAPE).perform()
    wait_for(driver, lambda d: not d.find_elements(By.CSS_SELECTOR, "[role='dialog']"), "the dialog to close")
    click(driver, "model_model")
    click(driver, f"OpenAI-{model}-option")
    wait_for(driver, lambda d: visible(d, "value-dropdown-model_model").text == model, f"{model} on the node")


def _paste_at_the_end_of_the_instructions(driver: WebDriver, text: str) -> None:
    """Open the Agent Instructions' editor, go to its end and insert `text` as a paste does (typed key by key it
    takes seconds), then Finish Editing."""
    click(driver, "button_open_text_area_modal_textarea_str_system_prompt")
    clickable(driver, "text-area-modal").send_keys(Keys.CONTROL, Keys.END)
    driver.execute_cdp_cmd("Input.insertText", {"text": text})
    click(driver, "genericModalBtnSave")


def _show_on_the_node(driver: WebDriver, name: str) -> None:
    """Add an advanced field to the node from its Parameters panel."""
    if not driver.find_elements(*by_test_id(f"inspector-add-{name}")):
        ActionChains(driver).move_to_element(visible(driver, "title-Summarizing Agent")).click().perform()
        click(driver, "parameters-button")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", visible(driver, f"inspector-add-{name}"))
    click(driver, f"inspector-add-{name}")
    wait_for(driver, lambda d: d.find_elements(*by_test_id(f"int_int_{name}")), f"{name} on the node")


def _type_and_leave(driver: WebDriver, test_id: str, text: str) -> None:
    """Replace a field's text as a user does (select all, type) and leave it with Tab, until the field shows it."""

    def shows_it(d: WebDriver) -> bool:
        field = clickable(d, test_id)
        if field.get_attribute("value") == text:
            return True
        d.execute_script("arguments[0].scrollIntoView({block: 'center'})", field)
        ActionChains(d).move_to_element(field).click().perform()
        field.send_keys(Keys.CONTROL, "a")
        field.send_keys(Keys.BACKSPACE)
        field.send_keys(text)
        field.send_keys(Keys.TAB)
        return False

    wait_for(driver, shows_it, f"{text!r} in {test_id}")


def _say(driver: WebDriver, text: str) -> None:
    """Send `text` in the Playground and wait for the loopback model's reply to it and for the build to end."""
    reply = f": {text[:40]}"

    def answered(d: WebDriver) -> bool:
        texts = [m.text for m in d.find_elements(*by_test_id("div-chat-message"))]
        return any("Reply " in t and reply in t for t in texts) and bool(d.find_elements(*by_test_id("button-send")))

    box = clickable(driver, "input-chat-playground")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)
    wait_for(driver, answered, f"the reply to {text!r}", TURN_WAIT_SECONDS)
    wait_for(driver, lambda d: clickable(d, "input-chat-playground").is_enabled(), "the chat input to be ready")


def _edges(server: LangflowServer, user: ServerUser, flow_id: str) -> set[tuple[str, str]]:
    """The saved flow's connections, as (source type, target type)."""
    with server.client(token=user.token) as client:
        data = client.get(f"/api/v1/flows/{flow_id}").raise_for_status().json()["data"]
    types = {node["id"]: node["data"]["type"] for node in data["nodes"]}
    return {(types[edge["source"]], types[edge["target"]]) for edge in data["edges"]}


def _summary_after_the_running_folds(
    server: LangflowServer, user: ServerUser, flow_id: str, session_id: str
) -> dict[str, Any]:
    """The session's summary once the fold after the last reply has ended (the read waits for it)."""
    with server.client(token=user.token) as client:
        response = client.get(f"/api/v1/summarizing-agent/sessions/{session_id}/summary", params={"flow_id": flow_id})
    body = response.raise_for_status().json()
    assert body["fold_running"] is False, body
    [summary] = body["summaries"]
    return summary


def _cached(recorded: Recorded) -> int:
    return recorded.usage["prompt_tokens_details"]["cached_tokens"]


def _log(sent: list[Recorded]) -> str:
    """One line a request: fold or agent call, cached and prompt tokens, the roles and starts of its messages."""
    lines = []
    for at, r in enumerate(sent):
        messages = " ".join(f"{m['role']}:{str(m.get('content'))[:24]!r}" for m in r.body["messages"][1:])
        kind = "fold " if r.is_fold else "agent"
        lines.append(f"{at:2} {kind} {_cached(r):5}/{r.usage['prompt_tokens']:5} {messages}")
    return "\n".join(lines)
