"""Every view of the browser (memories with the overview and the hooks' activity, a skill
read, a dream report holding memory and skill changes) at 1280 and 390 px, light and dark, in
Chromium: no horizontal scroll, and axe-core (tests/vendor) finds no serious or critical
violation in any of the twelve. The screenshots (tests/artifacts/ui-tour-*) are the ones to
look at for issue 25's criteria; `python -m tests.dev.docs_screenshots` makes README's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dreamwell.server.hooks.refresh import refresh
from dreamwell.stores.layout import DataDir
from tests.support.dreams import dreamt
from tests.support.hooks import hook, prompt
from tests.support.ui_browser import chromium, open_page, serious_violations, shot, ui_process

VIEWS = ("memories", "skills", "dreams")


def show(page: Any, view: str) -> None:
    """One view, drawn with something to read in it."""
    page.click(f"#views [data-view='{view}']")
    if view == "memories":
        page.wait_for_selector("#hooks summary")
        page.locator("#hooks summary").click()  # the hooks' sessions open too
    elif view == "skills":
        page.click("#skills button[data-name='deploy-site']")
        page.wait_for_selector("#skill pre.skill-md")
        page.locator("#skill .history summary").first.click()
    else:  # the newest run's report is drawn on opening; on a phone the runs fold away
        page.wait_for_selector("#report .change")
        phone = page.viewport_size["width"] <= 720
        assert page.locator("#runs-box").evaluate("d => d.open") is not phone


def activity(data: Path) -> None:
    """A dream with memory and skill changes, and client hooks that ran (one failed)."""
    store = dreamt(data)
    store.checkpoint()
    refresh(DataDir(data))  # the hooks' snapshot: no background refresher started
    hook("user-prompt", prompt("s1", "when do deploys happen?"), data)
    hook("user-prompt", b"{broken", data)


def test_every_view_at_two_widths_and_two_themes_is_accessible(tmp_path: Path) -> None:
    activity(tmp_path)
    with ui_process(tmp_path) as url, chromium() as browser:
        for scheme in ("light", "dark"):
            for width in (1280, 390):
                page = open_page(browser, url, width, 800, color_scheme=scheme, bypass_csp=True)
                for view in VIEWS:
                    show(page, view)
                    wide = page.evaluate("() => document.documentElement.scrollWidth")
                    assert wide <= width, (view, scheme, width, wide)
                    shot(page, f"ui-tour-{view}-{scheme}-{width}")
                    found = serious_violations(page)
                    assert found == [], f"{view} {scheme} {width}:\n" + "\n".join(found)
                page.close()
