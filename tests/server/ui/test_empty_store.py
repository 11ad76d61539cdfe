"""A fresh store's browser says nothing is stored yet and how memories get there, where the
list would be; a store with memories never shows that hint, and a search with no hits keeps
its own "0 matches"."""

from __future__ import annotations

from pathlib import Path

from tests.support.ui_browser import chromium, open_page, serious_violations, shot, ui_process

HINT = "#empty-store"


def test_an_empty_store_shows_how_memories_arrive_until_one_is_saved(tmp_path: Path) -> None:
    """Issue 44: the browser's empty store gave no hint (an empty list, "0 memories")."""
    with ui_process(tmp_path / "data") as url, chromium() as browser:
        page = open_page(browser, url, 1200, 900, bypass_csp=True)
        page.wait_for_selector(f"{HINT}:visible")
        hint = " ".join(page.locator(HINT).inner_text().split())
        for way in ("save_memory", "dreamwell install claude-code", "dreamwell import FILE"):
            assert way in hint, hint
        assert page.locator("#count").inner_text() == "Nothing stored yet."
        assert page.locator("#list li").count() == 0
        shot(page, "ui-empty-store-1200")
        found = serious_violations(page)
        assert found == [], "\n".join(found)
        page.click("#new")
        page.fill("#create textarea[name=content]", "Prefers green tea")
        page.click("#create button[type=submit]")
        page.wait_for_selector("#count:text-is('1 memory')")
        assert page.locator(HINT).is_hidden()
        page.fill("#q", "qwertyuiopasdf")
        page.press("#q", "Enter")
        page.wait_for_selector("#count:text-is('0 matches')")
        assert page.locator(HINT).is_hidden()
        page.select_option("#archived", "archived")  # a filter with nothing in it
        page.wait_for_selector("#count:text-is('0 memories')")
        assert page.locator(HINT).is_hidden()
