"""The dream report reads like a diff in Chromium, for every kind of change the memory and
skill passes make: a memory or skill the dream created shows "— → value" rows (nothing struck
out) with its text; a changed one old → new in that order, numbers rounded as `dreamwell dream`
prints them; merge sources side by side; each run labelled "2 archived, 1 merged, …".

The first test runs a real dream (the scripted LLM of tests/support/fake_openai.py) that merges,
learns a preference and an anti-pattern, creates, merges, archives and improves skills. The second
draws a stored report holding the kinds that dream does not make here (decay, score, used,
prune, superseded, derived, skill guide, see-also and update), built as the passes build them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from dreamwell.dream.report import Change, PassResult, Report, save_report
from dreamwell.dream.skills.commit import record
from dreamwell.stores import LongTermStore, MemoryEntry, new_id, utcnow
from dreamwell.stores.skills.catalog import SkillCatalog
from tests.support.dreams import (
    PREFERENCE,
    add_skill,
    dreamt,
)
from tests.support.ui_browser import chromium, open_page, serious_violations, shot, ui_process


def cells(box: Any, field: str) -> str:
    return str(box.locator(f"tr[data-field='{field}'] td").nth(1).inner_text())


def old_before_new(box: Any, field: str) -> None:
    html = box.locator(f"tr[data-field='{field}'] td").nth(1).inner_html()
    assert "<del>" in html and html.index("<del>") < html.index("<ins>"), html


@contextmanager
def report_page(data: Path, width: int = 1280, scheme: str = "light") -> Iterator[Any]:
    """The Dreams view with the newest run's report drawn."""
    with ui_process(data) as url, chromium() as browser:
        page = open_page(browser, url, width, 900, color_scheme=scheme, bypass_csp=True)
        page.click("#views [data-view='dreams']")
        page.locator("#runs .run").first.click()
        page.wait_for_selector("#report .change")
        yield page


def test_a_real_dreams_creations_read_as_new_values_and_its_changes_old_to_new(
    tmp_path: Path,
) -> None:
    store = dreamt(tmp_path)
    pref = next(e for e in store.entries() if e.content == PREFERENCE)
    with report_page(tmp_path) as page:
        label = page.locator("#runs .run small").first.inner_text()
        for part in (
            "2 archived",
            "1 merged",
            "1 preference learned",
            "1 anti-pattern learned",
            "1 skill created",
            "1 skill merged",
            "1 skill archived",
            "1 skill improved",
        ):
            assert re.search(rf"(^|, ){part}(,|$)", label), (part, label)
        assert page.locator("#report .summary").inner_text() == label
        spend = page.locator("#report .spend").inner_text()  # which LLM ran, what it spent
        assert re.fullmatch(
            r"LLM: openai:fake-model@\S+, \d+ calls, [\d,]+ of 200,000 tokens", spend
        )
        box = page.locator("#report .change[data-kind='preference']")
        assert box.locator(".text").inner_text() == PREFERENCE
        assert cells(box, "category") == "— → user-preferences/inferred"
        assert cells(box, "tags") == "— → #inferred"
        assert cells(box, "importance") == f"— → {pref.importance:.2f}"
        assert cells(box, "score") == "— → +0.00"  # as the CLI prints a score
        assert box.locator("del").count() == 0
        assert box.locator("tr td .none").count() == box.locator("tr[data-field]").count()
        anti = page.locator("#report .change[data-kind='anti-pattern']")
        assert anti.locator(".from").inner_text() == "learnt from sessions: s9"
        assert cells(anti, "category") == "— → anti-patterns/release"
        merge = page.locator("#report .change[data-kind='merge']")
        quotes = merge.locator(".sources blockquote").all_inner_texts()
        assert sorted(quotes) == ["Deploys happen on Fridays", "deploys happen on fridays!"]
        created = page.locator("#report .change[data-kind='skill-create']")
        assert "[billing-release]" in created.locator("h3").inner_text()
        assert cells(created, "status") == "— → candidate"
        assert created.locator("del").count() == 0
        assert created.locator(".sources").count() == 0  # sessions, named in its note
        assert "make release" in created.locator("tr[data-field='SKILL.md'] ins").inner_text()
        skill_merge = page.locator("#report .change[data-kind='skill-merge']")
        assert skill_merge.locator(".from").inner_text() == "merged from:"
        quotes = skill_merge.locator(".sources blockquote").all_inner_texts()
        assert [q.split()[0] for q in quotes] == ["deploy-site", "deploy-frontend"]
        assert "purge the CDN" in quotes[1] and "---" not in quotes[1]  # the body, side by side
        old_before_new(skill_merge, "SKILL.md")
        archived = page.locator("#report .change[data-kind='skill-archive']")
        assert cells(archived, "status") == "active → archived"
        old_before_new(archived, "status")
        improve = page.locator("#report .change[data-kind='skill-improve']")
        assert "make test" in " ".join(improve.locator("ins").all_inner_texts())
        shot(page, "ui-dream-diff-1280", full=True)
        page.set_viewport_size({"width": 390, "height": 800})
        wide = page.evaluate("() => document.documentElement.scrollWidth")
        assert wide <= 390, wide
        label = page.locator("#report tr[data-field='importance'] td").first
        lines = "td => { const r = document.createRange(); r.selectNodeContents(td); "
        lines += "return r.getClientRects().length; }"
        assert label.evaluate(lines) == 1  # "importance" broke as "importanc e" (issue 56)
        shot(page, "ui-dream-diff-390", full=True)
        found = serious_violations(page)
        assert found == [], "\n".join(found)


def entry(content: str, **more: Any) -> MemoryEntry:
    now = utcnow() - timedelta(days=40)
    return replace(MemoryEntry(new_id(), content, "notes", (), now, now, now), **more)


def memory_changes(store: LongTermStore) -> list[Change]:
    """Changes shaped as dream/passes.py and dream/enrichment.py make them."""
    now = utcnow()
    vim, acme = entry("Uses vim keybindings", importance=0.625), entry("Works at Acme", score=0.1)
    boston, chicago = entry("Lives in Boston"), entry("Moved to Chicago in May")
    note = entry("Deploy: run make deploy, then purge the CDN; it takes 5 minutes")
    stale = entry("Asked about the weather once", score=-0.4)
    store.apply([vim, acme, boston, chicago, note, stale])
    fact = replace(entry("Deploys take 5 minutes"), metadata={"derived_from": note.id})
    return [
        Change("decay", vim, replace(vim, importance=0.5625)),
        Change("score", acme, replace(acme, score=0.19)),
        Change("used", acme, replace(acme, last_used_at=now)),
        Change("prune", stale, replace(stale, archived_at=now), (), "score -0.40, unused"),
        Change("archive", boston, replace(boston, archived_at=now), (chicago.id,), "superseded"),
        Change("derived", None, fact, (note.id,)),
    ]


def skill_changes(data: Path) -> list[Change]:
    """Skill changes shaped as dream/skills/consolidate.py makes them (whole records)."""
    add_skill(data, "deploy-web", "Run `make deploy-web`.")
    add_skill(data, "tidy-inbox", "Archive mail older than 30 days in `mutt`.")
    web = record(SkillCatalog(data).get("deploy-web"))
    tidy = record(SkillCatalog(data).get("tidy-inbox"))
    assert web is not None and tidy is not None
    md = web["files"]["SKILL.md"]["text"]
    updated = web | {"revision": 2, "files": {"SKILL.md": {"text": md + "\nThen purge the CDN."}}}
    linked = tidy | {"revision": 2, "see_also": ["deploy-web"]}
    guide_md = "---\nname: deploy-guide\ndescription: Which deploy\n---\n\nUse deploy-web."
    guide = web | {
        "name": "deploy-guide",
        "status": "candidate",
        "origin": "dream",
        "see_also": ["deploy-web"],
        "files": {"SKILL.md": {"text": guide_md}},
    }
    return [
        Change("skill-guide", None, None, ("deploy-web",), "a guide", None, guide),
        Change("skill-update", None, None, ("deploy-web",), "", web, updated),
        Change("skill-see-also", None, None, ("tidy-inbox",), "", tidy, linked),
    ]


def test_the_page_is_told_which_llm_ran_and_what_it_spent(tmp_path: Path) -> None:
    from dreamwell.server.ui.memories import report_view

    report = Report("r1", utcnow().isoformat(), False, "claude-code:haiku", llm_calls=3)
    report.llm_tokens, report.llm_budget = 4_210, 200_000
    view = report_view(report, LongTermStore(tmp_path, embedder=None))
    assert view["spend"] == "claude-code:haiku, 3 calls, 4,210 of 200,000 tokens"
    assert (view["llm_calls"], view["llm_tokens"], view["llm_budget"]) == (3, 4_210, 200_000)
    none = Report("r2", utcnow().isoformat(), False, None)
    assert report_view(none, LongTermStore(tmp_path, embedder=None))["spend"] == "none"


def test_every_other_kind_of_change_is_drawn_old_to_new(tmp_path: Path) -> None:
    store = LongTermStore(tmp_path, embedder=None)
    report = Report(f"{utcnow():%Y%m%dT%H%M%S}-all", utcnow().isoformat(), False, "fake")
    report.passes = [
        PassResult("memory", changes=memory_changes(store)),
        PassResult("skills", changes=skill_changes(tmp_path)),
        PassResult("pruning"),
    ]
    save_report(tmp_path, report)
    with report_page(tmp_path) as page:
        label = page.locator("#runs .run small").first.inner_text()
        assert label == (
            "1 decayed, 1 rescored, 1 marked used, 1 pruned, 1 archived, 1 fact derived, "
            "1 guide skill created, 1 skill updated, 1 skill linked"
        )
        decay = page.locator("#report .change[data-kind='decay']")
        assert cells(decay, "importance") == "0.62 → 0.56"  # .2f, as the CLI rounds
        old_before_new(decay, "importance")
        score = page.locator("#report .change[data-kind='score']")
        assert cells(score, "score") == "+0.10 → +0.19"
        used = page.locator("#report .change[data-kind='used']")
        assert re.fullmatch(r"— → \d{4}-\d\d-\d\d \d\d:\d\d", cells(used, "last_used_at"))
        prune = page.locator("#report .change[data-kind='prune']")
        assert "score -0.40" in prune.locator("h3").inner_text()
        superseded = page.locator("#report .change[data-kind='archive']")
        assert superseded.locator(".from").inner_text() == "superseded by:"
        assert superseded.locator(".sources").inner_text() == "Moved to Chicago in May"
        derived = page.locator("#report .change[data-kind='derived']")
        assert derived.locator(".from").inner_text() == "derived from:"
        assert "purge the CDN" in derived.locator(".sources").inner_text()  # from the store
        assert cells(derived, "category") == "— → notes"
        guide = page.locator("#report .change[data-kind='skill-guide']")
        assert cells(guide, "status") == "— → candidate"
        assert cells(guide, "see_also") == "— → deploy-web"
        assert guide.locator("del").count() == 0
        update = page.locator("#report .change[data-kind='skill-update']")
        assert "purge the CDN" in update.locator("tr[data-field='SKILL.md'] ins").inner_text()
        assert update.locator("tr[data-field='status']").count() == 0  # unchanged: no row
        assert update.locator(".sources").count() == 0  # its own name is no source
        linked = page.locator("#report .change[data-kind='skill-see-also']")
        assert linked.locator("tr[data-field='see_also'] ins").inner_text() == "deploy-web"
        assert page.locator("#report .quiet").inner_text() == "Nothing changed by: pruning"
        shot(page, "ui-dream-kinds-1280", full=True)
