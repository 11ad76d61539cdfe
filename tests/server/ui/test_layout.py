"""The memory browser as a person sees it, in real Chromium: no horizontal scroll from 360 to
1920 px (a 200-character URL included), the sidebar stacked on a phone, compact rows (≥ 8 on
an 800 px screen), "200 of 223" with "more", category totals and an uncategorised node, no
request that 404s (favicon), light and dark themes, and axe-core (shipped in tests/vendor)
finding no serious accessibility violation. Screenshots go to tests/artifacts/."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamwell.stores import LongTermStore, MemoryEntry, new_id, utcnow
from dreamwell.stores.hooks.sessions import HookSessions, hooks_log
from dreamwell.stores.layout import DataDir
from tests.support.ui_browser import chromium, open_page, serious_violations, shot, ui_process

URL = "https://example.com/" + "a" * 200
CATEGORIES = ["user/timezone", "user/drinks", "ops", "ops/deploy", "project/dreamwell", None]


def seed_many(data: Path, n: int = 223) -> None:
    now, rnd = utcnow(), random.Random(7)
    entries = []
    for i in range(n):
        text = f"Memory {i}: the user said something about topic {i % 17}, option {i % 9}"
        if i == 0:
            text = f"Docs for the deploy live at {URL}"
        base = MemoryEntry(
            new_id(), text, CATEGORIES[i % 6], (f"t{i % 4}",), now - timedelta(days=i % 9), now, now
        )
        entries.append(replace(base, importance=round(rnd.random(), 2)))
    LongTermStore(data, embedder=None).apply(entries)


def hooks_ran(data: Path) -> None:
    """What client hooks leave after a busy day (their own code path: session state and
    hooks.log), so the overview carries its hooks line while rows are measured."""
    sessions = HookSessions(DataDir(data))
    for i in range(12):
        state = sessions.load(f"session-{i}")
        state.cwd = f"/home/me/projects/project-{i}"
        state.note("turn")
        state.note("recall", 3)
        sessions.save(state)
    hooks_log(DataDir(data), "user-prompt failed: OSError: [Errno 28] No space left on device")


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("many") / "data"
    seed_many(data)
    hooks_ran(data)
    with ui_process(data) as url:
        yield url


def test_no_horizontal_scroll_from_360_to_1920_px_and_a_stacked_sidebar(many: str) -> None:
    with chromium() as browser:
        for width in (360, 390, 768, 1024, 1280, 1920):
            page = open_page(browser, many, width, 800)
            page.wait_for_selector(f".mem:has-text('{URL[:40]}')")
            wide = page.evaluate("() => document.documentElement.scrollWidth")
            assert wide <= width, f"{width} px wide page scrolls to {wide} px"
            listing = page.locator("#results").bounding_box()
            assert listing is not None and listing["width"] >= min(width - 40, 420), width
            if width <= 390:
                assert not page.locator("#cats").evaluate("d => d.open")  # collapsed
                page.click("#cats summary")
                page.wait_for_selector("#tree button[data-category='ops']")
                shot(page, f"ui-{width}-categories")
                page.click("#cats summary")
            if width in (390, 1280):
                shot(page, f"ui-{width}")
            page.close()


def test_dense_rows_paging_totals_and_no_404(many: str) -> None:
    missing: list[str] = []
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
        page.goto(many)
        page.wait_for_selector("#count:text-is('200 of 223 memories')")
        tops = page.locator(".mem").evaluate_all(
            "rows => rows.map(r => r.getBoundingClientRect().bottom)"
        )
        assert sum(1 for bottom in tops if bottom <= 800) >= 8, tops[:10]
        user = page.locator("#tree button[data-category='user']")
        assert user.inner_text().split()[:2] == ["user", "75"]  # parents: all under them
        none = page.locator("#tree button[data-category='(none)']")
        assert none.inner_text().split()[:2] == ["uncategorized", "37"]
        page.click("#more")
        page.wait_for_selector("#count:text-is('223 memories')")
        none.click()
        page.wait_for_selector("#count:text-is('37 memories')")
        assert all(
            c == "uncategorized" for c in page.locator(".mem .chip:not(.tag)").all_inner_texts()
        )
        page.click("#tree button[data-category='(all)']")
        page.wait_for_selector("#count:text-is('200 of 223 memories')")
        page.fill("#q", "topic 5")
        page.fill("#category", "")
        page.click("#search button[type='submit']")
        page.wait_for_selector(".mem mark")
        assert page.locator(".mem .match").first.inner_text().startswith("match ")
        assert page.locator(".mem").first.locator("mark").first.inner_text().lower() == "topic"
        assert missing == []


def test_themes_follow_the_system_and_axe_finds_no_serious_violation(many: str) -> None:
    with chromium() as browser:
        colors = {}
        for scheme, width in (("light", 1280), ("dark", 390)):
            page = open_page(browser, many, width, 800, color_scheme=scheme, bypass_csp=True)
            page.wait_for_selector("#tiles div")
            colors[scheme] = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
            shot(page, f"ui-{scheme}-{width}")
            page.locator(".mem .edit").first.click()  # an open editor too
            found = serious_violations(page)
            assert found == [], "\n".join(found)
            page.close()
        assert colors["light"] != colors["dark"]


def test_everything_is_reachable_by_keyboard(many: str) -> None:
    with chromium() as browser:
        page: Any = open_page(browser, many, 1280, 800)
        page.keyboard.press("Tab")
        assert page.evaluate("() => document.activeElement.textContent") == "Skip to the list"
        page.keyboard.press("Enter")
        assert page.evaluate("() => document.activeElement.id") == "results"
        reached = set()
        page.focus("#views button")
        for _ in range(30):
            page.keyboard.press("Tab")
            reached.add(page.evaluate("() => document.activeElement.closest('[id]')?.id"))
        assert {"views", "hooks", "tree", "search", "list"} <= reached, reached
        page.focus("#hooks summary")  # the hooks' sessions open from the keyboard
        page.keyboard.press("Enter")
        page.wait_for_selector("#hooks li:has-text('session-0 in /home/me/projects/project-0')")
        page.focus("#tree button[data-category='ops']")
        page.keyboard.press("Enter")
        page.wait_for_selector("#count:text-is('74 memories')")
        page.focus("#views [data-view='dreams']")
        page.keyboard.press("Enter")
        page.wait_for_selector("#view-dreams:visible")
        page.keyboard.press("Tab")
        assert page.evaluate("() => document.activeElement.id") == "preview"


def test_on_a_phone_the_results_come_before_the_overview_and_save_is_in_reach(
    many: str,
) -> None:
    """Issue 44: at 390 px the overview and the form pushed the results below the fold, and
    the editor's Save button off screen."""
    with chromium() as browser:
        page = open_page(browser, many, 390, 800)
        page.wait_for_selector(f".mem:has-text('{URL[:40]}')")
        results = page.locator("#results").bounding_box()
        overview = page.locator("#overview").bounding_box()
        assert results is not None and overview is not None
        assert results["y"] < overview["y"], (results, overview)
        first = page.locator(".mem").first
        first.locator(".edit").click()
        save = first.locator(".editor button[type='submit']")
        box = save.bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 800, box
        page.close()
