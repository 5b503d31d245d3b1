"""What the canvas shows is what runs: headless Chromium against the shared real server.

1. A value typed on the node that the settings would refuse comes back at the nearest accepted value, in the field
   and in the saved flow (never a refused value kept until the next run fails).
2. Switching Summarize Older Messages off and on keeps the Summary Model picked and removes no connection, and
   Number of Chat History Messages follows the switch from the stock Agent's 100 to the recommended 10.
3. Pinned keys are kept as keys a turn accepts while they are typed, in any script.
4. The ready Memory Chatbot opens with no node under another.
5. The sidebar's search for "memory" finds both components.
6. Every number field takes any value typed digit by digit; the server settles it once typing stops.
7. A new Pinned Keys row stays until something is typed into it.
8. An uploaded flow opens showing the settings its turns run with.
9. Picking the Agent's own model as Summary Model goes back to none.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from itertools import combinations
from typing import Any

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from langflow_summarizing_agent.engine.settings import MAX_PINNED_KEY_CHARS, settings_from
from tests.support.browser import (
    by_test_id,
    click,
    clickable,
    create_flow,
    one_node_flow,
    saved_template,
    screenshot_on_failure,
    visible,
    wait_for,
    wait_until_saved,
)
from tests.support.flow_files import AGENT_TYPE, MEMORY_CHATBOT_PATH
from tests.support.server_fixtures import LangflowServer, ServerUser

pytestmark = pytest.mark.browser

PICKED = [{"name": "gpt-4o-mini", "provider": "OpenAI", "icon": "OpenAI", "metadata": {}}]
OPENAI_KEY_VARIABLE = "OPENAI_API_KEY"
"""The global variable that connects OpenAI for the user, as Langflow's Model providers dialog saves it."""
AGENTS_MODEL, OTHER_MODEL = "gpt-5.4", "gpt-5.4-mini"
"""Two of the OpenAI models Langflow 1.13 enables once the provider is connected."""
SETTLE_SECONDS = 3
"""Longer than the canvas waits after typing stops (1 s) before the server settles a field."""
UPLOADED_PINNED_KEYS = ["customer name", "bad*key", "k" * 70]
RETYPE_SECONDS = 6
REMOVED_CONNECTIONS = "connections were removed"
"""Langflow's notice when a hidden handle loses its edge."""


def _agent_flow(server: LangflowServer, user: ServerUser, **fields: dict[str, Any]) -> str:
    """A new flow holding one Summarizing Agent as the sidebar adds it, with `fields` changed in its template."""
    return one_node_flow(server, user, AGENT_TYPE, name="Canvas test", viewport_y=-480, **fields)


def _open(driver: WebDriver, server: LangflowServer, flow_id: str) -> None:
    driver.get(f"{server.base_url}/flow/{flow_id}")
    visible(driver, "title-Summarizing Agent")


def _type_and_leave(driver: WebDriver, test_id: str, text: str) -> None:
    """Replace a field's text as a user does (select all, type) and leave it with Tab."""
    field = clickable(driver, test_id)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", field)
    ActionChains(driver).move_to_element(field).click().perform()
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(Keys.BACKSPACE)
    field.send_keys(text)
    field.send_keys(Keys.TAB)


def _enter(driver: WebDriver, test_id: str, text: str, kept: Callable[[str], bool], what: str) -> str:
    """Type `text` into the field and leave it until the field shows what `kept` accepts (a node that is still
    loading from the server resets what is typed meanwhile); the value it shows then."""
    typed_at = [0.0]

    def shows_it(d: WebDriver) -> bool:
        if kept(_shown(d, test_id)) and typed_at[0]:
            return True
        if time.monotonic() - typed_at[0] > RETYPE_SECONDS:
            _type_and_leave(d, test_id, text)
            typed_at[0] = time.monotonic()
        return False

    wait_for(driver, shows_it, what)
    return _shown(driver, test_id)


def _shown(driver: WebDriver, test_id: str) -> str:
    return clickable(driver, test_id).get_attribute("value") or ""


def _showing(text: str) -> Callable[[str], bool]:
    """The check that a field shows `text`."""
    return lambda shown: shown == text


def _field_is(name: str, value: Any) -> Callable[[dict[str, Any]], bool]:
    """The check that the saved template's field `name` holds `value`."""
    return lambda template: template[name]["value"] == value


def _saved(
    server: LangflowServer, user: ServerUser, flow_id: str, check: Callable[[dict[str, Any]], bool], what: str
) -> dict[str, Any]:
    return wait_until_saved(server, user, flow_id, AGENT_TYPE, check, what)


def _switch(driver: WebDriver, server: LangflowServer, user: ServerUser, flow_id: str, *, on: bool) -> dict[str, Any]:
    """Set Summarize Older Messages on the node, clicking again if a click is lost while the node still loads; the
    template saved once the switch is."""
    wanted = "true" if on else "false"

    def switched(d: WebDriver) -> bool:
        if clickable(d, "toggle_bool_summarize_older_messages").get_attribute("aria-checked") != wanted:
            click(d, "toggle_bool_summarize_older_messages")
            return False
        return saved_template(server, user, flow_id, AGENT_TYPE)["summarize_older_messages"]["value"] is on

    wait_for(driver, switched, f"Summarize Older Messages {wanted} on the node and saved")
    return saved_template(server, user, flow_id, AGENT_TYPE)


def test_a_refused_number_comes_back_at_the_nearest_accepted_value_in_the_field_and_the_saved_flow(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser
) -> None:
    browser = logged_in
    flow_id = _agent_flow(
        langflow_server, user, fold_batch={"advanced": False}, history_token_budget={"advanced": False}
    )
    try:
        _open(browser, langflow_server, flow_id)

        _enter(browser, "int_int_fold_batch", "0", lambda shown: shown == "1", "Fold Batch 0 to show 1")
        _saved(langflow_server, user, flow_id, lambda t: t["fold_batch"]["value"] == 1, "Fold Batch 1")

        for typed in ("150", "-5"):
            shown = int(
                _enter(
                    browser,
                    "int_int_history_token_budget",
                    typed,
                    lambda shown: shown.isdigit() and 200 <= int(shown) != 7_000,
                    f"History Token Budget {typed} to come back at the least budget that holds the summary",
                )
            )
            template = _saved(
                langflow_server,
                user,
                flow_id,
                _field_is("history_token_budget", shown),
                f"the History Token Budget the field shows ({shown})",
            )
            values = {name: template[name]["value"] for name in ("fold_batch", "history_token_budget")}
            assert settings_from(values) is not None
    except Exception:
        screenshot_on_failure(browser, "canvas-numbers-failure.png")
        raise


def test_switching_off_and_on_keeps_the_summary_model_and_the_window_follows_the_switch(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser
) -> None:
    browser = logged_in
    flow_id = _agent_flow(langflow_server, user, summary_model={"advanced": False, "value": PICKED})
    try:
        _open(browser, langflow_server, flow_id)
        visible(browser, "title-summary model")

        off = _switch(browser, langflow_server, user, flow_id, on=False)
        assert off["n_messages"]["value"] == 100
        on = _switch(browser, langflow_server, user, flow_id, on=True)
        visible(browser, "title-summary model")
        page = browser.find_element(By.TAG_NAME, "body").text
    except Exception:
        screenshot_on_failure(browser, "canvas-switch-failure.png")
        raise

    assert on["n_messages"]["value"] == 10
    assert [(m["provider"], m["name"]) for m in on["summary_model"]["value"]] == [("OpenAI", "gpt-4o-mini")]
    assert on["summary_model"]["external_options"] == {}, "a picker only: no Connect other models"
    assert REMOVED_CONNECTIONS not in page


def test_pinned_keys_are_kept_as_keys_while_they_are_typed_in_any_script(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser
) -> None:
    browser = logged_in
    flow_id = _agent_flow(langflow_server, user)
    try:
        _open(browser, langflow_server, flow_id)
        _enter(
            browser,
            "inputlist_str_pinned_keys_0",
            "customer name",
            lambda shown: shown == "customer_name",
            "customer name to be kept as customer_name",
        )
        click(browser, "input-list-plus-btn_pinned_keys-0")
        _type_and_leave(browser, "inputlist_str_pinned_keys_1", "客户")
        saved = _saved(
            langflow_server,
            user,
            flow_id,
            lambda t: t["pinned_keys"]["value"] == ["customer_name", "客户"],
            "Pinned Keys ['customer_name', '客户']",
        )
    except Exception:
        screenshot_on_failure(browser, "canvas-pinned-keys-failure.png")
        raise

    assert "any script" in saved["pinned_keys"]["info"]
    assert "at most 64 characters" in saved["pinned_keys"]["info"]


def test_the_ready_memory_chatbot_opens_with_no_node_under_another(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser
) -> None:
    browser = logged_in
    flow = json.loads(MEMORY_CHATBOT_PATH.read_text(encoding="utf-8"))
    flow.pop("id", None)
    flow_id = create_flow(langflow_server, user, flow)
    try:
        browser.get(f"{langflow_server.base_url}/flow/{flow_id}")
        visible(browser, "title-Summarizing Message History")
        # Read at once, and again if the canvas re-renders meanwhile (wait_for looks again on a stale element).
        boxes = wait_for(
            browser,
            lambda d: (
                len(found := d.find_elements(By.CSS_SELECTOR, ".react-flow__node")) == 5
                and {node.text.split("\n", 1)[0]: node.rect for node in found}
            ),
            "the flow's five nodes",
        )
    except Exception:
        screenshot_on_failure(browser, "memory-chatbot-layout-failure.png")
        raise

    overlapping = [(a, b) for (a, box_a), (b, box_b) in combinations(boxes.items(), 2) if _overlap(box_a, box_b)]
    assert overlapping == [], boxes


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


def test_searching_the_sidebar_for_memory_finds_both_components(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser
) -> None:
    browser = logged_in
    flow_id = _agent_flow(langflow_server, user)
    try:
        _open(browser, langflow_server, flow_id)
        clickable(browser, "sidebar-search-input").send_keys("memory")
        # Sidebar entries are `<category><display name>`; our bundle is the category.
        visible(browser, "summarizing_agentSummarizing Agent")
        visible(browser, "summarizing_agentSummarizing Message History")
    except Exception:
        screenshot_on_failure(browser, "sidebar-memory-search-failure.png")
        raise


def test_every_number_field_takes_a_value_typed_digit_by_digit_and_the_server_settles_it(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser
) -> None:
    browser = logged_in
    on_the_node = {"advanced": False}
    flow_id = _agent_flow(
        langflow_server, user, summary_words=on_the_node, fold_batch=on_the_node, max_folds_per_turn=on_the_node
    )
    typed = [
        ("int_int_summary_words", "summary_words", "50", 50),
        ("int_int_summary_words", "summary_words", "10", 20),
        ("int_int_fold_batch", "fold_batch", "12", 12),
        ("int_int_max_folds_per_turn", "max_folds_per_turn", "0", 1),
    ]
    try:
        _open(browser, langflow_server, flow_id)
        for test_id, name, text, kept in typed:
            _enter(browser, test_id, text, _showing(str(kept)), f"{text} to show {kept}")
            time.sleep(SETTLE_SECONDS)
            assert _shown(browser, test_id) == str(kept), f"{text} typed into {name}"
            _saved(langflow_server, user, flow_id, _field_is(name, kept), f"{name} {kept}")
    except Exception:
        screenshot_on_failure(browser, "canvas-typed-numbers-failure.png")
        raise


def test_a_new_pinned_key_row_stays_until_something_is_typed_into_it(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser
) -> None:
    browser = logged_in
    flow_id = _agent_flow(langflow_server, user, pinned_keys={"value": ["project_id"]})
    try:
        _open(browser, langflow_server, flow_id)
        visible(browser, "inputlist_str_pinned_keys_0")
        click(browser, "input-list-plus-btn_pinned_keys-0")
        visible(browser, "inputlist_str_pinned_keys_1")
        time.sleep(SETTLE_SECONDS)
        _type_and_leave(browser, "inputlist_str_pinned_keys_1", "cluster")
        _saved(
            langflow_server,
            user,
            flow_id,
            lambda t: t["pinned_keys"]["value"] == ["project_id", "cluster"],
            "Pinned Keys ['project_id', 'cluster']",
        )
    except Exception:
        screenshot_on_failure(browser, "canvas-new-pinned-key-row-failure.png")
        raise


def test_an_uploaded_flow_opens_showing_the_settings_its_turns_run_with(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser
) -> None:
    """Langflow keeps what the canvas settles as a flow opens without saving it (its on-open refresh does not mark
    the flow changed); a turn settles the saved values alike, so it runs with what the node shows."""
    browser = logged_in
    flow_id = _agent_flow(langflow_server, user, pinned_keys={"value": UPLOADED_PINNED_KEYS}, fold_batch={"value": 0})
    shown_keys = ["customer_name", "badkey", "k" * MAX_PINNED_KEY_CHARS]
    try:
        _open(browser, langflow_server, flow_id)
        wait_for(
            browser,
            lambda d: [_shown(d, f"inputlist_str_pinned_keys_{row}") for row in range(3)] == shown_keys,
            f"the uploaded Pinned Keys shown as {shown_keys}",
        )
    except Exception:
        screenshot_on_failure(browser, "canvas-uploaded-flow-failure.png")
        raise

    saved = saved_template(langflow_server, user, flow_id, AGENT_TYPE)
    run = settings_from({name: saved[name]["value"] for name in ("pinned_keys", "fold_batch")})
    assert run is not None
    assert (list(run.pinned_keys), run.fold_batch) == (shown_keys, 1)


@pytest.fixture
def openai_connected(langflow_server: LangflowServer, user: ServerUser) -> Iterator[None]:
    """OpenAI connected for the user (its key saved as the Model providers dialog saves it), removed after the test,
    so that the other browser tests, which share the user, find no provider connected."""
    with langflow_server.client(token=user.token) as client:
        created = client.post(
            "/api/v1/variables/",
            json={"name": OPENAI_KEY_VARIABLE, "value": "sk-typed", "type": "Credential", "default_fields": []},
        ).raise_for_status()
    try:
        yield
    finally:
        with langflow_server.client(token=user.token) as client:
            client.delete(f"/api/v1/variables/{created.json()['id']}").raise_for_status()


def test_picking_the_agents_own_model_as_summary_model_goes_back_to_none(
    logged_in: WebDriver, langflow_server: LangflowServer, user: ServerUser, openai_connected: None
) -> None:
    browser = logged_in
    agents_model = [{"name": AGENTS_MODEL, "provider": "OpenAI", "icon": "OpenAI", "metadata": {}}]
    other_model = [{**agents_model[0], "name": OTHER_MODEL}]
    flow_id = _agent_flow(
        langflow_server,
        user,
        model={"value": agents_model},
        summary_model={"advanced": False, "value": other_model},
    )
    try:
        _open(browser, langflow_server, flow_id)
        wait_for(
            browser,
            lambda d: visible(d, "value-dropdown-model_summary_model").text == OTHER_MODEL,
            f"{OTHER_MODEL} picked as Summary Model",
        )

        def picked_none(d: WebDriver) -> bool:
            # A pick made while the node still refreshes from the server can be lost: pick again until it holds.
            if d.find_elements(*by_test_id(f"OpenAI-{AGENTS_MODEL}-option")):
                click(d, f"OpenAI-{AGENTS_MODEL}-option")
            elif visible(d, "value-dropdown-model_summary_model").text == OTHER_MODEL:
                click(d, "model_summary_model")
            return not saved_template(langflow_server, user, flow_id, AGENT_TYPE)["summary_model"]["value"]

        wait_for(browser, picked_none, "the canvas to save no Summary Model picked", seconds=60)
        saved = saved_template(langflow_server, user, flow_id, AGENT_TYPE)
        shown = visible(browser, "value-dropdown-model_summary_model").text
    except Exception:
        screenshot_on_failure(browser, "canvas-summary-model-none-failure.png")
        raise

    assert AGENTS_MODEL not in shown
    assert [(m["provider"], m["name"]) for m in saved["model"]["value"]] == [("OpenAI", AGENTS_MODEL)]
    assert "goes back to none" in saved["summary_model"]["info"]
