"""The memory browser: its API behind bearer tokens, tenants and CSRF checks (through the real
HTTP stack), and the page itself driven in a real Chromium by Playwright."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx2
import pytest

from dreamwell.server.config import Settings
from dreamwell.server.runtime import Runtime
from dreamwell.server.ui.memories import revision
from dreamwell.stores import LongTermStore
from tests.support.servers import http_server
from tests.support.ui_browser import (
    ARTIFACTS,
    csrf_of,
    seeded_page,
)


@pytest.mark.anyio
async def test_served_at_root_of_http_behind_the_same_tokens_and_tenants(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"token-aaaa-1": "alice", "token-bbbb-2": "bob"}))
    settings = Settings(
        data_dir=tmp_path / "d", embedder="none", transport="http", port=0, tokens_file=tokens
    )
    LongTermStore(tmp_path / "d" / "tenants" / "alice", embedder=None).save("Alice's secret")
    async with http_server(settings, Runtime(settings)) as url, httpx2.AsyncClient() as http:
        page = await http.get(f"{url}/")
        assert page.status_code == 200 and "<title>dreamwell" in page.text
        assert (await http.get(f"{url}/ui/api/memories")).status_code == 401
        alice = {"authorization": "Bearer token-aaaa-1"}
        bob = {"authorization": "Bearer token-bbbb-2"}
        mine = (await http.get(f"{url}/ui/api/memories", headers=alice)).json()["memories"]
        assert [m["content"] for m in mine] == ["Alice's secret"]
        assert (await http.get(f"{url}/ui/api/memories", headers=bob)).json()["memories"] == []
        edit = f"{url}/ui/api/memories/{mine[0]['id']}/edit"
        body = {"importance": 0.9, "revision": mine[0]["revision"]}
        no_csrf = await http.post(edit, json=body, headers=alice)
        assert no_csrf.status_code == 403 and "CSRF" in no_csrf.json()["error"]
        csrf = {"x-dreamwell-csrf": csrf_of(page.text)}
        evil = {**alice, **csrf, "origin": "http://evil.example"}
        refused = await http.post(edit, json=body, headers=evil)
        assert refused.status_code == 403 and "cross-site" in refused.json()["error"]
        by_bob = await http.post(edit, json=body, headers={**bob, **csrf})
        assert by_bob.status_code == 404
        done = await http.post(edit, json=body, headers={**alice, **csrf, "origin": url})
        assert done.status_code == 200 and done.json()["memory"]["importance"] == 0.9
        fresh = done.json()["memory"]["revision"]
        bad = await http.post(
            edit, json={"category": "../x", "revision": fresh}, headers={**alice, **csrf}
        )
        assert bad.status_code == 400 and "category" in bad.json()["error"]
        assert (await http.get(f"{url}/mcp", headers=bob)).status_code != 401


# ---- the page in a real browser ------------------------------------------------------------
def answer_late(page: Any, route: Any) -> None:
    """Let a held request through and give the page a moment to draw what it answers."""
    with page.expect_response(lambda r: r.url == route.request.url):
        route.continue_()
    page.wait_for_timeout(500)


def test_a_person_browses_edits_deletes_restores_and_dreams_in_chromium(
    ui_server: tuple[str, Path],
) -> None:
    url, data = ui_server
    ARTIFACTS.mkdir(exist_ok=True)
    with seeded_page(url) as page:
        assert page.locator("#tree button[data-category='user']").count() == 1
        merged = page.locator(".mem:has(.content:text-is('Deploys happen on Fridays'))")
        assert "merged from" not in merged.inner_text()  # details are behind a disclosure
        merged.locator(".details").click()
        assert "merged from" in merged.inner_text()
        assert page.locator(".mem .editor").first.is_hidden()
        assert page.locator("#view-dreams").is_hidden()
        page.screenshot(path=str(ARTIFACTS / "ui-memories.png"), full_page=True)

        page.click("#tree button[data-category='user/drinks']")
        page.wait_for_selector("#count:text('1 memory')")
        card = page.locator(".mem").first
        card.locator(".edit").click()
        card.locator("input[name='tags']").fill("Drinks, morning")
        card.locator("input[name='importance']").fill("0.95")
        page.screenshot(path=str(ARTIFACTS / "ui-edit.png"), full_page=True)
        card.locator("button[type='submit']").click()
        page.wait_for_selector("#status-text:text('Saved.')")
        (tea,) = [e for e in LongTermStore(data, embedder=None).entries() if "tea" in e.content]
        assert tea.tags == ("drinks", "morning") and tea.importance == 0.95

        page.locator(".mem .archive").first.click()
        page.wait_for_selector("#status-text:text('Deleted.')")
        page.fill("#category", "")
        page.select_option("#archived", "archived")
        page.wait_for_selector("#count:text('2 memories')")
        page.locator(".mem", has_text="green tea").locator(".restore").click()
        page.wait_for_selector("#status-text:text('Restored.')")
        assert LongTermStore(data, embedder=None).get(tea.id).live  # type: ignore[union-attr]

        page.click("#views [data-view='dreams']")
        assert page.locator("#view-memories").is_hidden()
        page.click("#preview")
        page.wait_for_selector("#report h2:text('(preview, nothing changed)')")
        assert page.locator("#report .change").count() >= 1
        assert len(LongTermStore(data, embedder=None).entries()) == 4
        page.screenshot(path=str(ARTIFACTS / "ui-dream-preview.png"), full_page=True)
        page.click("#apply")
        page.wait_for_selector("#undo")
        assert page.locator("#report ins, #report del").count() >= 1
        # a diff: the memory's text, the merged sources side by side, old before new, and
        # runs named by date and time with what changed
        merge = page.locator("#report .change", has=page.locator("h3:text-is('merge')"))
        assert merge.locator(".text").inner_text() == "Deploys happen on Fridays"
        assert sorted(merge.locator(".sources blockquote").all_inner_texts()) == [
            "Deploys happen on Fridays",
            "deploys happen on fridays!",
        ]
        # a memory the dream created: "— → value" rows, nothing struck out
        reinforced = merge.locator("tr[data-field='reinforcement_count'] td").nth(1)
        assert reinforced.inner_text() == "— → 2×"
        assert merge.locator("del").count() == 0
        # the list of runs is refreshed after the report is drawn: wait for the applied run
        page.wait_for_selector("#runs li:nth-child(2) .run")
        runs = page.locator("#runs .run").all_inner_texts()
        assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d\n2 archived, 1 merged$", runs[0]), runs
        page.screenshot(path=str(ARTIFACTS / "ui-dream-report.png"), full_page=True)
        assert len(LongTermStore(data, embedder=None).entries()) == 3
        page.click("#undo")
        page.wait_for_selector("#report h2:text('— undone')")
        assert len(LongTermStore(data, embedder=None).entries()) == 4
        page.click("#views [data-view='memories']")
        page.wait_for_selector("#last-dream:text('2 archived, 1 merged (undone)')")


def test_an_older_list_answering_late_never_draws_over_the_newer_one(
    ui_server: tuple[str, Path],
) -> None:
    """CI once failed the test above: the refresh after a delete was still in flight when the
    person switched to archived memories, and its late answer replaced the archived list."""
    url, _ = ui_server
    held: list[Any] = []

    def hold_live_lists(route: Any) -> None:
        if "archived=live" in route.request.url:
            held.append(route)
        else:
            route.continue_()

    with seeded_page(url) as page:
        page.route("**/ui/api/memories?*", hold_live_lists)
        page.click("#search button[type='submit']")  # a refresh of the live list, held back
        page.select_option("#archived", "archived")
        page.wait_for_selector("#count:text('1 memory')")
        assert len(held) == 1
        answer_late(page, held[0])
        assert page.locator("#count").inner_text() == "1 memory"
        assert "Boston" in page.locator("#list").inner_text()


def test_a_preview_answering_after_the_applied_dream_never_hides_its_undo(
    ui_server: tuple[str, Path],
) -> None:
    url, data = ui_server
    held: list[Any] = []
    with seeded_page(url) as page:
        page.route("**/ui/api/dream/preview", lambda route: held.append(route))
        page.click("#views [data-view='dreams']")
        page.click("#preview")
        page.click("#apply")
        page.wait_for_selector("#undo")
        assert len(held) == 1 and len(LongTermStore(data, embedder=None).entries()) == 3
        answer_late(page, held[0])
        assert page.locator("#undo").count() == 1
        assert "preview" not in page.locator("#report h2").inner_text()


@pytest.mark.anyio
async def test_editing_content_keeps_the_id_and_makes_the_new_text_searchable(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path / "d", embedder="none", transport="http", port=0)
    saved = LongTermStore(tmp_path / "d", embedder=None).save("Meeting on Monday", "work").entry
    shown = revision(saved)
    async with http_server(settings, Runtime(settings)) as url, httpx2.AsyncClient() as http:
        csrf = {"x-dreamwell-csrf": csrf_of((await http.get(f"{url}/")).text)}
        done = await http.post(
            f"{url}/ui/api/memories/{saved.id}/edit",
            json={"content": "Meeting moved to Thursday", "revision": shown},
            headers=csrf,
        )
        assert done.status_code == 200, done.text
        found = await http.get(f"{url}/ui/api/memories", params={"q": "thursday"})
        (hit,) = found.json()["memories"]
        assert hit["id"] == saved.id and hit["category"] == "work"
        assert hit["created_at"] == saved.created_at.isoformat()
        old = await http.get(f"{url}/ui/api/memories", params={"q": "monday"})
        assert old.json()["memories"] == []
        rebinding = await http.get(f"{url}/ui/api/memories", headers={"host": "evil.example"})
        assert rebinding.status_code == 403
