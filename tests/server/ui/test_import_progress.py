"""While `dreamwell import` runs in another process, the browser says how far it got, and
stops saying it when the import ends or its process dies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dreamwell.stores import DataDir
from tests.support.gated_import import gated_import, memories_file
from tests.support.ui_browser import chromium, open_page, serious_violations, shot, ui_process

LINE = "#importing"


def polled(page: Any) -> Any:
    """What the page's poll (/ui/api/version) says about a running import."""
    return page.evaluate("async () => (await api('/ui/api/version')).importing")


def test_a_running_import_shows_its_progress_until_it_ends_or_dies(tmp_path: Path) -> None:
    """Issue 44: an import in progress left the overview blank, with no word of it."""
    data = tmp_path / "data"
    source = memories_file(tmp_path / "in.jsonl", 300)
    with ui_process(data) as url, chromium() as browser:
        page = open_page(browser, url, 1200, 900, bypass_csp=True)
        importer = gated_import(data, source, tmp_path / "go", batch=100)
        try:
            page.wait_for_selector(f"{LINE}:text-is('Importing: 100 of 300 memories written…')")
            job = polled(page)
            assert (job["done"], job["total"], job["pid"]) == (100, 300, importer.pid)
            shot(page, "ui-import-progress-1200")
            found = serious_violations(page)
            assert found == [], "\n".join(found)
            (tmp_path / "go").touch()
            _, err = importer.communicate(timeout=120)
            assert importer.returncode == 0, err
        finally:
            importer.kill()
        page.wait_for_selector(LINE, state="hidden")
        page.wait_for_selector("#count:text-is('200 of 300 memories')")
        assert polled(page) is None
        assert not DataDir(data).import_progress.exists()

        other = memories_file(tmp_path / "more.jsonl", 300, word="other")
        killed = gated_import(data, other, tmp_path / "never", batch=100)
        try:
            page.wait_for_selector(f"{LINE}:text-is('Importing: 100 of 300 memories written…')")
        finally:
            killed.kill()  # SIGKILL: no cleanup runs, the marker stays behind
            killed.communicate(timeout=30)
        assert DataDir(data).import_progress.exists()
        page.wait_for_selector(LINE, state="hidden")
        assert polled(page) is None
