"""No edit made in the memory browser is lost: each edit sends the revision it was shown and a
stale one is refused (409, with the stored text) through the real HTTP stack and in two real
Chromium tabs; a memory deleted elsewhere says so; create, delete with Undo; live refresh that
never redraws under what a person is typing."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from playwright.sync_api import Locator, Page

from dreamwell.server.config import Settings
from dreamwell.server.runtime import Runtime
from dreamwell.server.ui.memories import edit, revision
from dreamwell.stores import InvalidInput, LongTermStore
from tests.support.secrets import leaked
from tests.support.servers import http_server
from tests.support.ui_browser import chromium, csrf_of, open_page, shot


@pytest.mark.anyio
async def test_a_stale_or_unknown_edit_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "d", embedder="none", transport="http", port=0)
    store = LongTermStore(tmp_path / "d", embedder=None)
    saved = store.save("Meeting on Monday", "work").entry
    async with http_server(settings, Runtime(settings)) as url, httpx2.AsyncClient() as http:
        csrf = {"x-dreamwell-csrf": csrf_of((await http.get(f"{url}/")).text)}
        (shown,) = (await http.get(f"{url}/ui/api/memories")).json()["memories"]
        base = f"{url}/ui/api/memories/{saved.id}"
        odd = await http.post(f"{base}/frobnicate", json={"content": "x"}, headers=csrf)
        assert odd.status_code == 404 and "frobnicate" in odd.json()["error"]
        blind = await http.post(f"{base}/edit", json={"content": "x"}, headers=csrf)
        assert blind.status_code == 400 and "revision" in blind.json()["error"]
        first = {"content": "Meeting on Tuesday", "revision": shown["revision"]}
        assert (await http.post(f"{base}/edit", json=first, headers=csrf)).status_code == 200
        second = {"content": "Meeting on Friday", "revision": shown["revision"]}
        stale = await http.post(f"{base}/edit", json=second, headers=csrf)
        assert stale.status_code == 409, stale.text
        assert stale.json()["current"]["content"] == "Meeting on Tuesday"
        assert store.get(saved.id).content == "Meeting on Tuesday"  # type: ignore[union-attr]
        again = {**second, "revision": stale.json()["current"]["revision"]}  # "overwrite"
        assert (await http.post(f"{base}/edit", json=again, headers=csrf)).status_code == 200
        assert store.get(saved.id).content == "Meeting on Friday"  # type: ignore[union-attr]
        store.delete(saved.id)
        gone = await http.post(f"{base}/edit", json=again, headers=csrf)
        assert gone.status_code == 404 and gone.json()["gone"] is True
        assert "deleted elsewhere" in gone.json()["error"]


@pytest.mark.anyio
async def test_create_and_a_version_that_moves_with_any_writer(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "d", embedder="none", transport="http", port=0)
    async with http_server(settings, Runtime(settings)) as url, httpx2.AsyncClient() as http:
        csrf = {"x-dreamwell-csrf": csrf_of((await http.get(f"{url}/")).text)}
        before = (await http.get(f"{url}/ui/api/version")).json()["version"]
        body = {
            "content": "Likes rye bread",
            "category": "food",
            "tags": "bread",
            "importance": 0.8,
        }
        made = await http.post(f"{url}/ui/api/memories", json=body, headers=csrf)
        assert made.status_code == 200, made.text
        assert made.json()["memory"]["importance"] == 0.8 and not made.json()["reinforced"]
        bad = await http.post(f"{url}/ui/api/memories", json={"content": " "}, headers=csrf)
        assert bad.status_code == 400 and "content" in bad.json()["error"]
        middle = (await http.get(f"{url}/ui/api/version")).json()["version"]
        LongTermStore(tmp_path / "d", embedder=None).save("Another writer's memory")
        after = (await http.get(f"{url}/ui/api/version")).json()["version"]
        assert before != middle != after
        overview = (await http.get(f"{url}/ui/api/overview")).json()
        assert overview["live"] == 2 and overview["categories"] == 1
        assert sum(d["count"] for d in overview["added"]) == 2


def test_two_tabs_edit_the_same_memory_and_neither_edit_is_lost(
    ui_server: tuple[str, Path],
) -> None:
    url, data = ui_server
    with chromium() as browser:
        a, b = open_page(browser, url), open_page(browser, url)
        rows = [p.locator(".mem:has(.content:text-is('Prefers green tea'))") for p in (a, b)]
        for row in rows:
            row.locator(".edit").click()
        rows[0].locator("textarea").fill("Prefers oolong tea")
        rows[0].locator("button[type='submit']").click()
        a.wait_for_selector("#status-text:text-is('Saved.')")
        rows[1].locator("textarea").fill("Prefers jasmine tea")
        rows[1].locator("button[type='submit']").click()
        conflict = b.locator(".conflict:visible")
        conflict.wait_for()
        assert "changed elsewhere" in conflict.inner_text()
        assert "Prefers oolong tea" in conflict.inner_text()  # the other text, shown
        shot(b, "ui-conflict-1280")
        store = LongTermStore(data, embedder=None)
        assert [e.content for e in store.entries() if "tea" in e.content] == ["Prefers oolong tea"]
        conflict.locator("button:text('Overwrite with mine')").click()
        b.wait_for_selector("#status-text:text-is('Saved.')")
        assert [e.content for e in store.entries() if "tea" in e.content] == ["Prefers jasmine tea"]


def editing(page: Page, entry_id: str, text: str) -> Locator:
    """The memory's row, its editor open with `text` typed in (not yet saved)."""
    row = page.locator(f".mem[data-id='{entry_id}']")
    row.locator(".edit").click()
    row.locator("textarea").fill(text)
    return row


def test_editing_a_memory_deleted_elsewhere_says_so_and_keeps_the_text(
    ui_server: tuple[str, Path],
) -> None:
    url, data = ui_server
    store = LongTermStore(data, embedder=None)
    (tea,) = [e for e in store.entries() if "tea" in e.content]
    with chromium() as browser:
        page = open_page(browser, url)
        row = editing(page, tea.id, "Prefers black tea")
        store.delete(tea.id)  # another process: an agent's delete_memory
        row.locator("button[type='submit']").click()
        conflict = row.locator(".conflict")
        conflict.wait_for()
        assert "deleted elsewhere" in conflict.inner_text()
        assert row.locator("textarea").input_value() == "Prefers black tea"
        conflict.locator("button").click()  # save my text as a new memory
        page.wait_for_selector("#status-text:text-is('Saved a new memory.')")
        assert "Prefers black tea" in [e.content for e in store.entries()]


def test_create_then_delete_with_undo_and_the_status_clears(ui_server: tuple[str, Path]) -> None:
    url, data = ui_server
    store = LongTermStore(data, embedder=None)
    with chromium() as browser:
        page = open_page(browser, url)
        page.click("#new")
        form = page.locator("#create")
        form.locator("textarea").fill("Keeps a bonsai on the desk")
        form.locator("input[name='category']").fill("user/hobbies")
        form.locator("input[name='tags']").fill("plants")
        form.locator("button[type='submit']").click()
        page.wait_for_selector("#status-text:text-is('Saved a new memory.')")
        assert form.is_hidden()
        page.wait_for_selector("#count:text-is('5 memories')")
        (made,) = [e for e in store.entries() if "bonsai" in e.content]
        assert made.category == "user/hobbies" and made.tags == ("plants",)
        page.locator(f".mem[data-id='{made.id}'] .archive").click()
        page.wait_for_selector("#status-text:text-is('Deleted.')")
        assert not store.get(made.id).live  # type: ignore[union-attr]
        page.click("#status-undo")
        page.wait_for_selector("#status-text:text-is('Restored.')")
        assert store.get(made.id).live  # type: ignore[union-attr]
        page.wait_for_selector(f".mem[data-id='{made.id}']")
        page.wait_for_selector("#status-text:empty", state="attached", timeout=30_000)  # clears


def test_live_refresh_shows_another_writer_and_keeps_what_is_typed(
    ui_server: tuple[str, Path],
) -> None:
    url, data = ui_server
    store = LongTermStore(data, embedder=None)
    with chromium() as browser:
        page = open_page(browser, url)
        store.save("Saved by an agent meanwhile", "ops")
        page.wait_for_selector(".mem:has-text('Saved by an agent meanwhile')")
        page.wait_for_selector("#tiles:has-text('5')")
        row = page.locator(".mem:has(.content:text-is('Prefers green tea'))")
        row.locator(".edit").click()
        row.locator("textarea").fill("Half-typed edit")
        store.save("A second memory from elsewhere", "ops")
        page.wait_for_selector("#status-text:text('changed elsewhere')")
        assert row.locator("textarea").input_value() == "Half-typed edit"
        row.locator(".cancel").click()  # done editing: the list catches up
        page.wait_for_selector(".mem:has-text('A second memory from elsewhere')")


def test_a_delete_right_after_a_save_uses_the_saved_revision(ui_server: tuple[str, Path]) -> None:
    """The list reloads after a save; a delete clicked before it has (held back here) used the
    card's old revision and was refused as stale (seen in CI: no "Deleted.")."""
    url, data = ui_server
    store = LongTermStore(data, embedder=None)
    (tea,) = [e for e in store.entries() if "tea" in e.content]
    with chromium() as browser:
        page = open_page(browser, url)
        row = editing(page, tea.id, "Prefers white tea")
        held: list[object] = []
        page.route("**/ui/api/memories?*", lambda route: held.append(route))
        row.locator("button[type='submit']").click()
        page.wait_for_selector("#status-text:text-is('Saved.')")
        row.locator(".archive").click()
        page.wait_for_selector("#status-text:text-is('Deleted.')")
        assert held  # the reload was still held back when the delete went through
        entry = store.get(tea.id)
        assert entry is not None and not entry.live and entry.content == "Prefers white tea"


def test_an_edit_in_the_browser_is_redacted_as_every_save_is(tmp_path: Path) -> None:
    """issue 53 goal 8: the browser's edits wrote content, category and tags as typed."""
    store = LongTermStore(tmp_path, embedder=None)
    saved = store.save("Deploy notes", "ops").entry
    token = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    body = {
        "content": f"Deploy with {token}",
        "category": f"ops/{token}",
        "tags": [token, "deploy"],
        "revision": revision(saved),
    }
    new = edit(store, saved.id, "edit", body)
    assert (new.content, new.category, new.tags) == (
        "Deploy with [REDACTED]",
        "ops/redacted",
        ("deploy",),
    )
    with pytest.raises(InvalidInput, match="content is empty once"):
        edit(store, saved.id, "edit", {"content": token, "revision": revision(new)})
    assert leaked(tmp_path, [token]) == []
