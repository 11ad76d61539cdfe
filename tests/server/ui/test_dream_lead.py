"""The dream page leads with what ran and what was skipped and why, naming the setting to
add, and draws no "0 changes" block (issue 44: a dream without an LLM opened with three
"skill-…: 0 changes" blocks, the skipped passes in one line at the bottom). In Chromium."""

from __future__ import annotations

from pathlib import Path

from dreamwell.stores import LongTermStore
from tests.support.cli import NO_EMBEDDER, dreamwell
from tests.support.ui_browser import chromium, open_page, ui_process


def test_a_dream_without_an_llm_says_first_what_ran_and_what_was_skipped(tmp_path: Path) -> None:
    data = tmp_path / "d"
    store = LongTermStore(data)
    store.save("We moved to Lisbon in March")
    store.save("we moved to lisbon in march!", category="life")
    done = dreamwell("dream", "--once", "--data-dir", str(data), env=NO_EMBEDDER)
    assert done.returncode == 0, done.stderr
    with ui_process(data) as url, chromium() as browser:
        page = open_page(browser, url)
        page.click("#views [data-view='dreams']")
        page.locator("#runs .run").first.click()
        page.wait_for_selector("#report .ran")
        paragraphs = page.locator("#report > p").all_inner_texts()
        lead = [p for p in paragraphs if p.startswith(("Ran:", "Skipped"))]
        assert lead[0].startswith("Ran: ") and "decay" in lead[0]
        skipped = " ".join(lead[1:])
        assert "skill-gap" in skipped and "consolidation" in skipped
        assert "llm_base_url" in skipped  # the setting to add
        headings = page.locator("#report h3").all_inner_texts()
        assert not [h for h in headings if ": 0 changes" in h], headings
        first = page.locator("#report > *").all_inner_texts()
        assert first.index(lead[0]) < 3  # after the date (and the summary), before the rest
