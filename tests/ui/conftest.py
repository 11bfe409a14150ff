"""The browser tests' pieces: Debian's Chromium driven by Playwright (headless), a live service on 127.0.0.1, and a
page that records console errors and saves checked screenshots."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.service.support import live_server

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = Path(os.environ.get("AGENTGRAD_CHROMIUM", "/usr/bin/chromium"))


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: run scripts/install-browser.sh (make pytest does)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the dev extra installs playwright")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                              args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Session:
    """A browser page on the live service, its console errors and where its screenshots go."""

    page: Page
    url: str
    home: Path
    shots: Path
    errors: list[str] = field(default_factory=list)

    def shot(self, name: str) -> Path:
        """Save a full-page screenshot and check it is a rendered page, not a blank one."""
        from tests.ui.pictures import check_screenshot

        path = self.shots / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        check_screenshot(path)
        return path


@pytest.fixture
def session(browser: Browser, tmp_path: Path) -> Iterator[Session]:
    home = tmp_path / "home"
    with live_server(home, stream_poll=0.05) as url:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(30_000)
        shots = tmp_path / "screenshots"
        shots.mkdir()
        current = Session(page, url, home, shots)
        page.on("console", lambda message: current.errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: current.errors.append(str(error)))
        try:
            yield current
        finally:
            context.close()
