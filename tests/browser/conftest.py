"""The browser tests' fixtures: one headless Chromium for the whole run, logged in as a user of the shared server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from tests.support.browser import ARTIFACTS_DIR, CHROMIUM_ARGUMENTS, ROOT, WAIT_SECONDS, system_binary
from tests.support.server_fixtures import LangflowServer, ServerUser


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM_BINARY") or system_binary("chromium", "chromium-browser")
    for argument in CHROMIUM_ARGUMENTS:
        options.add_argument(argument)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    # A driver path of our own keeps Selenium Manager (which would download one) out of it.
    service = webdriver.ChromeService(executable_path=os.environ.get("CHROMEDRIVER") or system_binary("chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def user(langflow_server: LangflowServer) -> ServerUser:
    return langflow_server.create_user()


@pytest.fixture(scope="session")
def logged_in(browser: WebDriver, langflow_server: LangflowServer, user: ServerUser) -> WebDriver:
    browser.get(f"{langflow_server.base_url}/login")
    username = WebDriverWait(browser, WAIT_SECONDS).until(
        expected_conditions.visibility_of_element_located((By.NAME, "username"))
    )
    username.send_keys(user.username)
    browser.find_element(By.CSS_SELECTOR, "input[type='password']").send_keys(user.password, Keys.ENTER)
    WebDriverWait(browser, WAIT_SECONDS).until(lambda d: "/login" not in d.current_url)
    return browser


@pytest.fixture(scope="session")
def screenshots_dir(request: pytest.FixtureRequest) -> Path:
    """Where the screenshots the README shows are written: `docs/screenshots/` only when asked, so a test run leaves
    the checkout as it was."""
    directory = ROOT / "docs" / "screenshots" if request.config.getoption("--update-screenshots") else ARTIFACTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    return directory
