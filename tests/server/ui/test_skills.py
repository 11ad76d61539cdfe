"""The memory browser's Skills view: list with uses, read, edit with compare-and-set (a stale
revision is refused with 409 and the stored SKILL.md, through real HTTP and in two Chromium
tabs), approve and reject candidates, pin, archive/restore, and each skill's history of dream
changes; no serious axe violations; screenshots at 1280 and 390 px."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from dreamwell.dream.report import Change, PassResult, Report, save_report
from dreamwell.server.config import Settings
from dreamwell.server.runtime import Runtime
from dreamwell.stores import SkillCatalog, SkillUsage
from dreamwell.stores.skills.folders import make_folder
from dreamwell.stores.skills.record import skill_to_json
from tests.support.servers import http_server
from tests.support.ui_browser import (
    chromium,
    csrf_of,
    open_page,
    seed,
    serious_violations,
    shot,
    ui_process,
)

RELEASE = "1. On a clean `main`, run `scripts/bump.sh`.\n2. Push the tag.\n"


def skill_md(name: str, description: str, body: str) -> bytes:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n{body}".encode()


def add_skill(data: Path, name: str, description: str, body: str, status: str = "active") -> None:
    folder = make_folder(name, {"SKILL.md": skill_md(name, description, body)}, name)
    SkillCatalog(data).put(folder, status=status, origin="dream" if status != "active" else "user")


def seed_skills(data: Path) -> None:
    add_skill(data, "cut-release", "How to cut a release of the billing service", RELEASE)
    add_skill(
        data,
        "weekly-report",
        "Write the weekly status report from the tracker",
        "1. Export the tracker.\n2. Summarise by team.\n",
        status="candidate",
    )
    usage = SkillUsage(data)
    for session in ("s1", "s2", "s3"):
        usage.record_use(session, "cut-release", "hook")
    before = json.loads(skill_to_json(SkillCatalog(data).get("cut-release")))
    after = json.loads(json.dumps(before))
    after["files"]["SKILL.md"]["text"] += "3. Watch the deploy.\n"
    change = Change("skill-improve", None, None, (), "sparse", before, after)
    ran = PassResult("skill-optimisation", changes=[change])
    report = Report("20261120T010000-abc", "2026-11-20T01:00:00+00:00", False, "fake", [ran])
    save_report(data, report)


@pytest.mark.anyio
async def test_skill_changes_over_http_are_compare_and_set(tmp_path: Path) -> None:
    data = tmp_path / "d"
    settings = Settings(data_dir=data, embedder="none", transport="http", port=0)
    seed_skills(data)
    catalog = SkillCatalog(data)
    async with http_server(settings, Runtime(settings)) as url, httpx2.AsyncClient() as http:
        csrf = {"x-dreamwell-csrf": csrf_of((await http.get(f"{url}/")).text)}
        listed = (await http.get(f"{url}/ui/api/skills")).json()
        rows = {s["name"]: s for s in listed["skills"]}
        assert rows["cut-release"]["uses_30d"] == 3 and rows["cut-release"]["last_used"]
        assert rows["weekly-report"]["status"] == "candidate"
        assert listed["counts"] == {"active": 1, "candidate": 1, "archived": 0}
        one = (await http.get(f"{url}/ui/api/skills/cut-release")).json()
        assert one["skill"]["skill_md"].startswith("---\nname: cut-release")
        assert [h["kind"] for h in one["history"]] == ["skill-improve"]
        base, shown = f"{url}/ui/api/skills/cut-release", one["skill"]["revision"]
        new_md = skill_md("cut-release", "Cut a release", RELEASE + "3. Announce it.\n").decode()
        first = {"skill_md": new_md, "revision": shown}
        assert (await http.post(f"{base}/edit", json=first, headers=csrf)).status_code == 200
        stale = await http.post(f"{base}/edit", json={**first, "skill_md": "x"}, headers=csrf)
        assert stale.status_code == 409 and "Announce" in stale.json()["current"]["skill_md"]
        assert "Announce" in catalog.get("cut-release").body
        blind = await http.post(f"{base}/pin", json={}, headers=csrf)
        assert blind.status_code == 400 and "revision" in blind.json()["error"]
        odd = await http.post(f"{base}/frobnicate", json={"revision": 2}, headers=csrf)
        assert odd.status_code == 404
        bad = {"skill_md": "no front matter", "revision": catalog.get("cut-release").revision}
        refused = await http.post(f"{base}/edit", json=bad, headers=csrf)
        assert refused.status_code == 400 and "Announce" in catalog.get("cut-release").body
        candidate = catalog.get("weekly-report")
        rev = {"revision": candidate.revision}
        path = f"{url}/ui/api/skills/weekly-report"
        assert (await http.post(f"{path}/reject", json=rev, headers=csrf)).status_code == 200
        assert catalog.get("weekly-report").status == "archived"
        again = {"revision": catalog.get("weekly-report").revision}
        not_candidate = await http.post(f"{path}/approve", json=again, headers=csrf)
        assert not_candidate.status_code == 400 and "not a candidate" in not_candidate.text
        missing = await http.get(f"{url}/ui/api/skills/no-such-skill")
        assert missing.status_code == 404 and missing.json()["gone"] is True


@pytest.fixture
def skills_ui(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    data = tmp_path / "data"
    seed(data)
    seed_skills(data)
    with ui_process(data) as url:
        yield url, data


def open_skill(page: object, name: str) -> None:
    page.click("#views [data-view='skills']")  # type: ignore[attr-defined]
    page.click(f"#skills button[data-name='{name}']")  # type: ignore[attr-defined]
    page.wait_for_selector(f"#skill h2:text-is('{name}')")  # type: ignore[attr-defined]


def test_two_tabs_edit_one_skill_and_a_candidate_is_approved(
    skills_ui: tuple[str, Path],
) -> None:
    url, data = skills_ui
    catalog = SkillCatalog(data)
    with chromium() as browser:
        a, b = open_page(browser, url), open_page(browser, url)
        for page in (a, b):
            open_skill(page, "cut-release")
            page.click("#skill .edit")
        text_a = skill_md("cut-release", "Cut a release", RELEASE + "3. Tab A.\n").decode()
        a.fill("#skill textarea", text_a)
        a.click("#skill .editor button[type='submit']")
        a.wait_for_selector("#status-text:text-is('Saved.')")
        b.fill("#skill textarea", text_a.replace("Tab A", "Tab B"))
        b.click("#skill .editor button[type='submit']")
        conflict = b.locator("#skill .conflict:visible")
        conflict.wait_for()
        assert "changed elsewhere" in conflict.inner_text() and "Tab A" in conflict.inner_text()
        assert "Tab A" in catalog.get("cut-release").body  # nothing overwritten
        shot(b, "ui-skill-conflict-1280")
        conflict.locator("button:text('Overwrite with mine')").click()
        b.wait_for_selector("#status-text:text-is('Saved.')")
        assert "Tab B" in catalog.get("cut-release").body

        open_skill(a, "weekly-report")
        a.click("#skill .approve")
        a.wait_for_selector("#status-text:text-is('Approved.')")
        assert catalog.get("weekly-report").status == "active"
        a.wait_for_selector("#skills button[data-name='weekly-report']:has-text('active')")


def test_archive_restore_pin_history_and_accessibility(skills_ui: tuple[str, Path]) -> None:
    url, data = skills_ui
    catalog = SkillCatalog(data)
    with chromium() as browser:
        page = open_page(browser, url, bypass_csp=True)
        open_skill(page, "cut-release")
        row = page.locator("#skills button[data-name='cut-release']")
        assert "3 uses in 30 days" in row.inner_text() and "last used" in row.inner_text()
        assert "scripts/bump.sh" in page.locator("#skill pre.skill-md").inner_text()
        history = page.locator("#skill .history details")
        assert history.count() == 1 and "skill-improve — sparse" in history.inner_text()
        history.locator("summary").click()
        added = " ".join(" ".join(history.locator("ins").all_inner_texts()).split())
        assert "Watch the deploy." in added  # SKILL.md, diffed
        shot(page, "ui-skills-1280", full=True)
        assert serious_violations(page) == []
        page.click("#skill .pin")
        page.wait_for_selector("#status-text:text-is('Pinned.')")
        assert catalog.get("cut-release").pinned
        page.click("#skill .archive")
        page.wait_for_selector("#status-text:text-is('Archived.')")
        assert catalog.get("cut-release").status == "archived"
        page.click("#skill .restore")
        page.wait_for_selector("#status-text:text-is('Restored.')")
        assert catalog.get("cut-release").status == "active"
        catalog.archive("weekly-report")  # another process: the live refresh shows it
        page.wait_for_selector("#skills button[data-name='weekly-report']:has-text('archived')")
        small = open_page(browser, url, width=390, height=844, bypass_csp=True)
        open_skill(small, "cut-release")
        assert small.evaluate("document.documentElement.scrollWidth") <= 390
        shot(small, "ui-skills-390", full=True)
        assert serious_violations(small) == []


def test_an_action_right_after_another_is_sent_with_the_revision_the_first_left(
    skills_ui: tuple[str, Path],
) -> None:
    """A person who clicks the next button as soon as "Pinned." shows may click one drawn
    before the pin; it sends the revision the pin left (the skill takes the pin's answer, as
    a memory does after an edit), not the one the pin moved (a 409). The skill's read is held
    back here so that the redraw lags behind the pin, as it did on a loaded CI machine."""
    url, data = skills_ui
    catalog = SkillCatalog(data)
    with chromium() as browser:
        page = open_page(browser, url)
        open_skill(page, "cut-release")

        def slow_read(route: Any) -> None:
            if route.request.method == "GET":
                time.sleep(1.5)
            route.continue_()

        page.route("**/ui/api/skills/cut-release", slow_read)
        page.click("#skill .pin")
        page.wait_for_selector("#status-text:text-is('Pinned.')")
        page.click("#skill .archive")
        page.wait_for_selector("#status-text:text-is('Archived.')")
        assert catalog.get("cut-release").status == "archived"
        assert page.locator("#skill .conflict:visible").count() == 0
