"""Headless Chromium through Selenium for the web pages' browser tests, and axe-core for their
accessibility check.

The system's ``chromium`` and ``chromedriver`` (Debian's packages; ``.ci/run`` installs
them) run with a fresh profile and nothing that reaches out by itself. axe-core comes from the
npm registry once into a cache folder, and is injected into each page checked.
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

# The pinned axe-core release, and where it is kept between runs.
AXE_VERSION = "4.14.1"
AXE_CACHE = Path(os.environ.get("KB_AXE_CACHE", Path(tempfile.gettempdir()) / "kbcite-axe"))

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage")

DESKTOP = (1280, 900)
PHONE = (390, 844)


def chromium_paths():
    """``(chromium, chromedriver)`` where both are installed, else None."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def start_chromium(profile, size=DESKTOP):
    """A Selenium driver of headless Chromium with a fresh profile under ``profile``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = chromium_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument("--user-data-dir=%s" % profile)
    options.add_argument("--window-size=%d,%d" % size)
    chrome = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    chrome.set_page_load_timeout(60)  # a loaded CI machine is slow to draw a page
    return chrome


def axe_source():
    """axe-core's ``axe.min.js`` text, fetched from the npm registry into ``AXE_CACHE`` once;
    None where npm is missing or cannot fetch it."""
    script = AXE_CACHE / "node_modules" / "axe-core" / "axe.min.js"
    if not script.exists():
        npm = shutil.which("npm")
        if npm is None:
            return None
        AXE_CACHE.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix",
                               str(AXE_CACHE), "axe-core@%s" % AXE_VERSION],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or not script.exists():
            return None
    return script.read_text(encoding="utf-8")


def axe_or_skip():
    """axe-core's source; the test is skipped without it (failed in CI, which must have it)."""
    import pytest

    source = axe_source()
    if source is None:
        if os.environ.get("CI"):
            pytest.fail("axe-core could not be fetched with npm")
        pytest.skip("axe-core could not be fetched with npm")
    return source


def axe_violations(chrome, source):
    """axe-core's violations on the page ``chrome`` shows, as ``[(id, impact, targets)]``."""
    chrome.execute_script(source)
    result = chrome.execute_async_script(
        "var done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']})"
        ".then(function (r) { done(r.violations.map(function (v) {"
        "  return [v.id, v.impact, v.nodes.map(function (n) { return n.target.join(' '); })];"
        "})); }, function (e) { done([['axe-error', 'critical', [String(e)]]]); });")
    return [tuple(v) for v in result]


# How long a browser test waits for a page to do what it should (a loaded CI machine is slow).
WAIT_S = 15


def wait_for(chrome, condition, what, wait_s=WAIT_S):
    """Wait until ``condition(chrome)`` is true; fail naming ``what``. An element that is not
    there yet, or went stale because the page was replaced under it, is "not yet", as
    Selenium's own WebDriverWait takes it."""
    import time
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if condition(chrome):
                return
        except (NoSuchElementException, StaleElementReferenceException):
            pass
        time.sleep(0.1)
    raise AssertionError("%s did not happen in %d s; the page (%s): %s"
                         % (what, wait_s, chrome.current_url, chrome.page_source[:2000]))


def by_css(chrome, selector):
    """The first element matching a CSS selector; NoSuchElementException if none, naming
    the page that lacks it (its address, title and the start of its source), so that a
    failure on a loaded machine says whether the page was an error page."""
    from selenium.common.exceptions import NoSuchElementException
    from selenium.webdriver.common.by import By
    try:
        return chrome.find_element(By.CSS_SELECTOR, selector)
    except NoSuchElementException:
        raise NoSuchElementException("no %r on the page %s (title %r): %s" % (
            selector, chrome.current_url, chrome.title, chrome.page_source[:1500])) from None


def all_css(chrome, selector):
    """Every element matching a CSS selector."""
    from selenium.webdriver.common.by import By
    return chrome.find_elements(By.CSS_SELECTOR, selector)
