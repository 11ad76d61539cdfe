"""The memory browser draws a dream report holding skill changes (whole skill records, no
memory entries): the skill's name and its SKILL.md diff, in Chromium; undo from the page puts
the skill back."""

from __future__ import annotations

from pathlib import Path

from dreamwell.dream import DreamOptions, run_cycle
from dreamwell.dream.llm import OpenAILLM
from dreamwell.stores import LongTermStore
from dreamwell.stores.skills.catalog import SkillCatalog
from tests.support.dreams import RELEASE, at_risk, improved, model
from tests.support.fake_openai import fake_openai
from tests.support.skill_samples import content_of
from tests.support.ui_browser import ARTIFACTS, seeded_page


def test_a_skill_change_is_drawn_with_its_skill_md_diff_and_undone(
    ui_server: tuple[str, Path],
) -> None:
    url, data = ui_server
    at_risk(data)
    before = content_of(SkillCatalog(data).get("cut-release"))
    better = "0. Run `make test` and stop if it fails.\n" + RELEASE
    ARTIFACTS.mkdir(exist_ok=True)
    with seeded_page(url) as page, fake_openai(model(optimise=improved(better))) as (llm_url, _):
        llm = OpenAILLM(llm_url, "fake-model", 10.0)
        store = LongTermStore(data, embedder=None)
        run_cycle(store, llm, options=DreamOptions(quiet_seconds=0))
        assert "make test" in SkillCatalog(data).get("cut-release").body
        page.click("#views [data-view='dreams']")
        page.locator("#runs .run").first.click()  # the newest run: this one
        heading = page.locator("#report h3", has_text="skill-improve [cut-release]")
        heading.wait_for()
        assert "at risk" in heading.inner_text()
        box = page.locator("#report .change", has_text="skill-improve [cut-release]")
        added = " ".join(" ".join(box.locator("ins").all_inner_texts()).split())
        assert "make test" in added and "stop if it fails" in added  # SKILL.md, diffed
        page.screenshot(path=str(ARTIFACTS / "ui-dream-skill-change.png"), full_page=True)
        page.click("#undo")
        page.wait_for_selector("#report h2:text('— undone')")
    assert content_of(SkillCatalog(data).get("cut-release")) == before
