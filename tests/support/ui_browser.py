"""What the browser tests share: `dreamwell ui` in a subprocess on a data directory, and Debian's
Chromium driven by Playwright (absent: skipped on a laptop, failed in CI)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamwell.stores import LongTermStore, MemoryEntry, new_id, utcnow
from tests.support import ROOT

ARTIFACTS = ROOT / "tests" / "artifacts"
AXE = ROOT / "tests" / "vendor" / "axe-core" / "axe.min.js"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextmanager
def ui_process(data: Path, embedder: str = "none", **env_more: str) -> Iterator[str]:
    """`dreamwell ui` on `data`; yields the address it printed once it listens (with its
    token: `http://127.0.0.1:PORT/?token=…`; `base_of` and `bearer_of` split it)."""
    env = {**os.environ, "DREAMWELL_EMBEDDER": embedder, **env_more}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dreamwell.server", "ui", "--port", "0", "--data-dir", str(data)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # printed once the socket listens
        found = re.search(r"http://127\.0\.0\.1:\d+/\?token=[\w-]+", line)
        assert found, line
        yield found.group(0)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()


def base_of(url: str) -> str:
    """`http://127.0.0.1:PORT/` of the address `dreamwell ui` printed."""
    return url.partition("?")[0]


def bearer_of(url: str) -> dict[str, str]:
    """The header that opens `dreamwell ui` to a program: its token as a bearer token."""
    return {"authorization": f"Bearer {url.partition('?token=')[2]}"}


def browser_or_fail() -> Any:
    """The Playwright module when Chromium is here; in CI its absence fails the test."""
    missing = ""
    try:
        from playwright import sync_api
    except ImportError:
        missing = "the playwright package (pip install -e '.[dev]')"
    else:
        if not Path(CHROMIUM).exists():
            missing = f"{CHROMIUM} (apt-get install chromium)"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"browser test needs {missing}")
        pytest.skip(f"browser test needs {missing}")
    return sync_api


@contextmanager
def chromium() -> Iterator[Any]:
    sync_api = browser_or_fail()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_page(browser: Any, url: str, width: int = 1200, height: int = 900, **more: Any) -> Any:
    """A page on `url` once its list is drawn (its count line says how many)."""
    page = browser.new_page(viewport={"width": width, "height": height}, **more)
    page.set_default_timeout(20_000)
    page.goto(url)
    page.wait_for_selector("#count:not(:empty)")
    return page


def shot(page: Any, name: str, full: bool = False) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full)


def serious_violations(page: Any) -> list[str]:
    """axe-core (shipped in tests/vendor, no network) on the page as it is: the rules broken
    with a serious or critical impact, one line each. The page needs bypass_csp=True."""
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("async () => await axe.run(document)")
    return [
        f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']][:3]}"
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def csrf_of(page: str) -> str:
    found = re.search(r'name="dreamwell-csrf" content="([^"]+)"', page)
    assert found, page
    return found.group(1)


def seed(data: Path) -> dict[str, MemoryEntry]:
    """Four live memories (two of them the same text, for the dream to merge), one archived."""
    now = utcnow()

    def entry(content: str, category: str | None, **more: object) -> MemoryEntry:
        base = MemoryEntry(new_id(), content, category, (), now, now, now)
        return replace(base, **more)  # type: ignore[arg-type]

    entries = {
        "tz": entry("User is in Chicago (UTC-6)", "user/timezone", tags=("location",)),
        "tea": entry("Prefers green tea", "user/drinks", importance=0.7),
        "dup1": entry(
            "Deploys happen on Fridays",
            "ops",
            created_at=now - timedelta(days=3),
            metadata={"merged_from": "aaaaaaaaaaaa"},
        ),
        "dup2": entry("deploys happen on fridays!", "ops"),
        "old": entry("Used to live in Boston", "user", archived_at=now),
    }
    LongTermStore(data, embedder=None).apply(list(entries.values()))
    return entries


@contextmanager
def seeded_page(url: str) -> Iterator[Any]:
    """Chromium on the seeded page, once its four live memories are listed."""
    with chromium() as browser:
        page = open_page(browser, url)
        page.wait_for_selector("#count:text('4 memories')")
        yield page
