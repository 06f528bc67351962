"""The HTML report in a real headless browser: Debian's chromium driven by selenium through chromedriver.

The page must load from a file:// URL on a machine without network, log no console error, show exactly
one chart per topic (every image decoded), have its sections, and refer to no http(s) URL. Where the
browser or its driver is missing the test is skipped with a reason naming the missing binary, so the
pytest summary says so; `.ci/run` installs both (Debian packages chromium and chromium-driver), so in CI
it always runs. `.ci/run` installs them in the background while the suite runs, holding an exclusive lock
on the file named by ``TOPICFLOW_BROWSER_INSTALL_LOCK``; the test first waits for a shared lock on it,
that is for the install to end.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from topicflow.api.lda import LDA
from topicflow.io.outputs.report import SECTIONS
from topicflow.pipeline.evaluation.report import (
    ReportOptions,
    coherence_summary,
    write_model_report,
)
from topicflow.pipeline.update import update_model
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: Headless, no sandbox (containers), and nothing that reaches for the network on its own.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


#: Set by `.ci/run`: a file its background browser install holds an exclusive lock on until it ends.
INSTALL_LOCK = "TOPICFLOW_BROWSER_INSTALL_LOCK"


def wait_for_browser_install() -> None:
    """Block until `.ci/run`'s background install of the browser has ended (at once when none runs)."""
    lock = os.environ.get(INSTALL_LOCK)
    if lock and Path(lock).is_file():
        with open(lock, "rb") as held:
            fcntl.flock(held, fcntl.LOCK_SH)  # granted when the installer's exclusive lock is released


def browser_binaries() -> tuple[str, str]:
    """The chromium and chromedriver executables, or a skip naming the missing one."""
    wait_for_browser_install()
    found = []
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        located = path if Path(path).is_file() else shutil.which(Path(path).name)
        if located is None:
            pytest.skip(f"browser test not run: {path} is missing (Debian package {package}); `.ci/run` installs "
                        "chromium and chromium-driver before `make test`")
        found.append(located)
    return found[0], found[1]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    chromium, chromedriver = browser_binaries()
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = chromium
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.add_argument("--window-size=1400,1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[float, ...]]:
    """A report with every section filled: corpus examples, coherence, and two versions to compare."""
    base = tmp_path_factory.mktemp("browser-report")
    counts = draw_planted_corpus(n_docs=160, n_topics=4, n_terms=32, doc_length=25, alpha=0.2, seed=9).counts
    first = write_test_store(base / "first.zarr", {"default": counts["default"][:80]}, shard_size=40)
    grown = write_test_store(base / "grown.zarr", {"default": counts["default"]}, shard_size=40)
    LDA(4, method="online", batch_size=40, seed=2).fit(first).save(base / "model")
    update_model(base / "model", grown)
    coherence = coherence_summary(base / "model", grown, measure="u_mass")
    out = base / "report.html"
    write_model_report(base / "model", out, grown, coherence=coherence, options=ReportOptions(examples=3))
    return out, coherence.per_topic


def test_report_loads_cleanly_in_chromium(browser: Any, report_file: tuple[Path, tuple[float, ...]]) -> None:
    from selenium.webdriver.common.by import By

    path, coherence = report_file
    n_topics = len(coherence)
    browser.get(path.resolve().as_uri())
    assert browser.title.startswith("Topic model report")
    severe = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert severe == []
    cards = browser.find_elements(By.CSS_SELECTOR, "article.topic")
    assert len(cards) == n_topics
    for card in cards:
        charts = card.find_elements(By.CSS_SELECTOR, "img.topic-chart")
        assert len(charts) == 1
        assert card.find_elements(By.CSS_SELECTOR, "ol.examples li")
    assert len(browser.find_elements(By.CSS_SELECTOR, "img.topic-chart")) == n_topics
    # Every image decoded (a broken data: URL gives naturalWidth 0) and is shown.
    images = browser.find_elements(By.TAG_NAME, "img")
    assert {img.get_attribute("class") for img in images} == {"overview-chart", "topic-chart", "trace-chart",
                                                               "evolution-chart"}
    for image in images:
        assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", image) > 0
        assert image.is_displayed()
    sections = [s.get_attribute("id") for s in browser.find_elements(By.TAG_NAME, "section")]
    assert sections == list(SECTIONS)
    for section in ("overview", "topics", "trace", "evolution", "notes"):
        assert browser.find_element(By.ID, section).find_element(By.TAG_NAME, "h2").text
    assert "vanished" not in browser.find_element(By.ID, "evolution").text.split("Versions")[0]
    assert browser.find_elements(By.CSS_SELECTOR, "table.evolution tbody tr")
    # No element refers to an http(s) URL: every attribute of every element, as the browser parsed them.
    referring = browser.execute_script(
        "const found = [];"
        "for (const el of document.querySelectorAll('*')) {"
        "  for (const attr of el.attributes) {"
        "    if (/https?:\\/\\//i.test(attr.value)) found.push(el.tagName + ' ' + attr.name); } }"
        "return found;")
    assert referring == []
    # Nothing was fetched but the page itself and its inline data.
    resources = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(name.startswith("data:") for name in resources), resources
    shown = [float(c.text.split()[1]) for c in browser.find_elements(By.CSS_SELECTOR, "article.topic .badge")
             if c.text.startswith("coherence")]
    np.testing.assert_allclose(shown, coherence, atol=5e-4)  # shown with three decimals


def test_the_browser_test_waits_for_the_install_that_ci_runs_beside_the_suite(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `.ci/run` holds an exclusive flock on the file while its background install runs (here: flock(1)
    # holding it until its stdin closes, as the installer holds it until apt-get ends).
    lock = tmp_path / "browser-install.lock"
    lock.touch()
    monkeypatch.setenv(INSTALL_LOCK, str(lock))
    installer = subprocess.Popen(["flock", str(lock), "-c", "echo held; read _ || true"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
    assert installer.stdout is not None and installer.stdin is not None
    assert installer.stdout.readline() == "held\n"
    with open(lock, "rb") as probe, pytest.raises(BlockingIOError):
        fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)  # what the test's wait blocks on
    waiter = threading.Thread(target=wait_for_browser_install)
    waiter.start()
    installer.stdin.close()  # the install ends
    assert installer.wait() == 0
    waiter.join()
    with open(lock, "rb") as probe:
        fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)  # free again
    monkeypatch.delenv(INSTALL_LOCK)
    wait_for_browser_install()  # no install running: returns at once
