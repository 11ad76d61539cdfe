"""The dream's three skill passes through a whole cycle, against a scripted fake
OpenAI-compatible server on 127.0.0.1 and a real skills catalog on tmp_path: gap detection
(a request in two sessions makes one candidate, in one session none), consolidation (merges
with host arithmetic, seed 001's deletion guard), optimisation (the body guard), compare-and-set
against a user's edit made while the model thinks, and undo back to the exact catalog."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamwell.dream import DreamOptions, render, run_cycle, undo
from dreamwell.dream.llm import OpenAILLM
from dreamwell.stores import LongTermStore, utcnow
from dreamwell.stores.skills.catalog import SkillCatalog, SkillChange, SkillConflict
from dreamwell.stores.skills.folders import make_folder
from dreamwell.stores.skills.usage import SkillUsage
from tests.support.dreams import (
    RELEASE,
    Handler,
    add_skill,
    at_risk,
    dream,
    improved,
    kind_of,
    model,
    new_skill,
    say,
    three_overlapping,
)
from tests.support.fake_openai import fake_openai
from tests.support.skill_samples import content_of

QUIET = DreamOptions(quiet_seconds=0)


def prompt_of(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


def records(data: Path) -> dict[str, str]:
    """Every skill's whole record as the store writes it, but its revision (undo writes the
    old content under a new one)."""
    return {s.name: content_of(s) for s in SkillCatalog(data).list()}


def pass_of(report: Any, name: str) -> Any:
    return next(p for p in report.passes if p.name == name)


# ---- gap detection ---------------------------------------------------------------------------
def test_a_request_recurring_in_two_sessions_yields_one_candidate_skill(tmp_path: Path) -> None:
    say(tmp_path, "s1", "Cut a release of the billing service with make release")
    say(tmp_path, "s2", "Please cut the billing release again, make release as usual")
    say(tmp_path, "s3", "Write a haiku about spring rain")
    seen: list[str] = []

    def gap(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(prompt_of(request))
        return {
            "toSave": [
                new_skill("cut-billing-release", ["s1", "s2"]),
                new_skill("write-haiku", ["s3"]),  # one session only
                new_skill("spring-haiku", ["s3", "s1"]),  # s1 asked for no haiku
                new_skill("<lowercase-hyphenated-name>", ["s1", "s2"])  # the example's name
                | {"description": "Cut the billing release"},
            ]
        }

    with fake_openai(model(gap=gap)) as (url, _):
        _, report = dream(tmp_path, url)
    assert '"release": 2 session(s)' in seen[0] and '"billing": 2 session(s)' in seen[0]
    skills = SkillCatalog(tmp_path).list()
    assert [(s.name, s.status, s.origin) for s in skills] == [
        ("cut-billing-release", "candidate", "dream")
    ]
    notes = " ".join(pass_of(report, "skill-gap").notes)
    assert "'write-haiku': it cites 1 known session(s)" in notes
    assert "'spring-haiku': the sessions it cites do not ask for it" in notes
    assert "ignored a placeholder skill 'lowercase-hyphenated-name'" in notes
    created = pass_of(report, "skill-gap").changes
    assert [c.kind for c in created] == ["skill-create"] and created[0].skill_before is None


def test_a_request_seen_in_one_session_yields_no_skill(tmp_path: Path) -> None:
    say(tmp_path, "s1", "Cut a release of the billing service with make release")
    say(tmp_path, "s2", "What does the billing dashboard show today?")
    with fake_openai(model(gap=lambda r: {"toSave": [new_skill("cut-release", ["s1"])]})) as (
        url,
        script,
    ):
        _, report = dream(tmp_path, url)
    assert SkillCatalog(tmp_path).list() == []
    assert any("cites 1 known session(s)" in n for n in pass_of(report, "skill-gap").notes)
    assert any(kind_of(r) == "gap" for r in script.requests)  # "billing" recurs: it was asked


def test_auto_approve_makes_new_skills_active(tmp_path: Path) -> None:
    say(tmp_path, "s1", "Cut a release of the billing service with make release")
    say(tmp_path, "s2", "Cut the billing release again with make release")
    answer = {"toSave": [new_skill("cut-billing-release", ["s1", "s2"])]}
    with fake_openai(model(gap=lambda r: answer)) as (url, _):
        dream(tmp_path, url, skills_auto_approve=True)
    assert SkillCatalog(tmp_path).get("cut-billing-release").status == "active"


# ---- consolidation ---------------------------------------------------------------------------
def test_deletions_without_a_replacement_skip_the_whole_pass(tmp_path: Path) -> None:
    three_overlapping(tmp_path)
    before = records(tmp_path)
    answer = {
        "toDelete": ["deploy-site", "deploy-frontend"],
        "toSave": [  # a good see-also edit, but deploy-frontend is deleted with no replacement
            {
                "name": "deploy-web",
                "description": "d",
                "body": "Run `make deploy-web` then check https://web.example.com.",
                "sourceNames": ["deploy-web", "deploy-site"],
                "seeAlso": ["rotate-keys"],
            }
        ],
    }
    with fake_openai(model(consolidate=lambda r: answer)) as (url, _):
        _, report = dream(tmp_path, url)
    result = pass_of(report, "skill-consolidation")
    assert result.status == "skipped" and "deploy-frontend" in result.reason
    assert "seed 001's guard" in result.reason and result.changes == []
    assert records(tmp_path) == before


def test_a_merge_keeps_every_command_the_earliest_creation_and_the_uses(tmp_path: Path) -> None:
    three_overlapping(tmp_path)
    usage = SkillUsage(tmp_path)
    usage.record_use("a", "deploy-web", "prompt", now=utcnow() - timedelta(days=3))
    usage.record_use("b", "deploy-site", "prompt", now=utcnow() - timedelta(days=1))
    usage.record_use("c", "deploy-site", "resource", now=utcnow() - timedelta(days=2))
    oldest = SkillCatalog(tmp_path).get("deploy-web").created_at
    pinned_at = SkillCatalog(tmp_path).get("rotate-keys").revision
    tidy_at = SkillCatalog(tmp_path).get("tidy-inbox").revision
    body = (
        "1. Run `make deploy-web` (it takes 5 minutes).\n2. Purge the CDN.\n"
        "3. Check https://web.example.com."
    )
    seen: list[str] = []

    def plan(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(prompt_of(request))
        merged = {"description": "Deploy the web site", "body": body, "seeAlso": []}
        return {
            "toDelete": ["deploy-site", "deploy-frontend"],
            "toSave": [
                merged | {"name": "deploy", "sourceNames": ["deploy-site", "deploy-frontend"]},
                merged | {"name": "web-deploy", "sourceNames": ["deploy-web", "rotate-keys"]},
                {  # keeps every fact, but of two unrelated procedures
                    "name": "ops",
                    "description": "ops",
                    "body": "Run `make deploy-web` then check https://web.example.com.\n"
                    "Archive mail older than 30 days in `mutt`.",
                    "sourceNames": ["deploy-web", "tidy-inbox"],
                },
                merged | {"name": "deploy-all", "sourceNames": ["deploy-web"], "body": "Ship."},
                merged | {"name": "deploy-guide", "sourceNames": [], "body": "Which deploy."},
                merged | {"name": "misc-guide", "sourceNames": [], "body": "No such cluster."},
                {
                    "name": "tidy-inbox",
                    "description": "d",
                    "body": "Archive mail older than 30 days in `mutt`.",
                    "sourceNames": ["tidy-inbox"],
                    "seeAlso": ["deploy", "rotate-keys", "tidy-inbox", "no-such-skill"],
                },
            ],
        }

    with fake_openai(model(consolidate=plan)) as (url, _):
        _, report = dream(tmp_path, url)
    assert "[pinned: never changed]" in seen[0] and "- deploy-*: deploy-frontend" in seen[0]
    assert "uses in 30 days: 2" in seen[0]
    catalog = SkillCatalog(tmp_path)
    merged = catalog.get("deploy")
    assert merged.body.strip() == body and merged.status == "active"
    assert merged.created_at == catalog.get("deploy-site").created_at  # the earlier source
    assert {catalog.get(n).status for n in ("deploy-site", "deploy-frontend")} == {"archived"}
    assert catalog.get("deploy-web").status == "active" and catalog.find("web-deploy") is None
    assert catalog.get("rotate-keys").revision == pinned_at  # pinned: untouched
    notes = " ".join(pass_of(report, "skill-consolidation").notes)
    assert "rotate-keys pinned" in notes and "it drops" in notes and oldest < merged.created_at
    assert "refused merge of ['deploy-web', 'tidy-inbox'] into 'ops': they have too" in notes
    guide = catalog.get("deploy-guide")
    assert (guide.status, guide.origin) == ("candidate", "dream")
    assert guide.see_also == ("deploy-frontend", "deploy-site", "deploy-web")
    assert catalog.find("misc-guide") is None and "'misc-guide': not a parent guide" in notes
    tidy = catalog.get("tidy-inbox")  # see-also filled, body and description as they were
    assert tidy.see_also == ("rotate-keys",) and tidy.revision == tidy_at + 1
    kinds = sorted(c.kind for c in pass_of(report, "skill-consolidation").changes)
    assert kinds == [
        "skill-archive",
        "skill-archive",
        "skill-guide",
        "skill-merge",
        "skill-see-also",
    ]
    stats = SkillUsage(tmp_path).stats()
    assert stats.uses_30d["deploy"] == 2
    assert stats.last_used["deploy"] == stats.last_used["deploy-site"]


# ---- optimisation ----------------------------------------------------------------------------
def test_an_optimisation_that_drops_a_command_is_refused(tmp_path: Path) -> None:
    at_risk(tmp_path)
    before = records(tmp_path)
    lossy = RELEASE.replace("2. Push the tag: `git push origin v1.4.0`.\n", "")
    with fake_openai(model(optimise=improved("0. Run `make test`.\n" + lossy))) as (url, script):
        _, report = dream(tmp_path, url)
    asked = [prompt_of(r) for r in script.requests if kind_of(r) == "optimise"]
    assert "### Failure context" in asked[0] and "you forgot to run the tests" in asked[0]
    notes = " ".join(pass_of(report, "skill-optimisation").notes)
    assert "refused improvement of 'cut-release': it drops git push origin v1.4.0" in notes
    assert records(tmp_path) == before
    better = "0. Run `make test` and stop if it fails.\n" + RELEASE
    with fake_openai(model(optimise=improved(better))) as (url, _):
        _, report = dream(tmp_path, url)
    assert SkillCatalog(tmp_path).get("cut-release").body.strip() == better.strip()
    assert [c.kind for c in pass_of(report, "skill-optimisation").changes] == ["skill-improve"]
    assert "skill improve cut-release [active] (sparse: tests were skipped)" in render(report)


def test_a_sparse_skill_gets_the_review_note(tmp_path: Path) -> None:
    add_skill(tmp_path, "tidy-inbox", "Archive old mail.", 30)
    add_skill(tmp_path, "fresh-sparse", "Archive new mail.", 1)  # too young to be sparse
    same = {"name": "tidy-inbox", "body": "Archive old mail.", "reason": "fine as it is"}
    with fake_openai(model(optimise=lambda r: same)) as (url, script):
        _, report = dream(tmp_path, url)
    asked = [prompt_of(r) for r in script.requests if kind_of(r) == "optimise"]
    assert len(asked) == 1 and "Skill tidy-inbox" in asked[0]
    assert "### Review note: This skill has minimal content." in asked[0]
    assert (
        "kept 'tidy-inbox': the answer did not change it"
        in pass_of(report, "skill-optimisation").notes
    )


def test_a_skill_edited_while_the_llm_thinks_is_not_overwritten(tmp_path: Path) -> None:
    at_risk(tmp_path)
    edited = "0. Run `make test`.\n" + RELEASE + "4. Tell #billing.\n"

    def user_edits_then_answers(request: dict[str, Any]) -> dict[str, Any]:
        catalog = SkillCatalog(tmp_path)  # another writer, as the CLI or the browser would be
        skill = catalog.get("cut-release")
        md = skill.skill_md.replace(skill.body, "\n" + edited)
        catalog.put(make_folder("cut-release", {"SKILL.md": md.encode()}, "x"), skill.revision)
        return improved("0. Run `make test` first.\n" + RELEASE)(request)

    with fake_openai(model(optimise=user_edits_then_answers)) as (url, _):
        _, report = dream(tmp_path, url)
    assert SkillCatalog(tmp_path).get("cut-release").body.strip() == edited.strip()
    result = pass_of(report, "skill-optimisation")
    assert result.changes == []
    assert any(
        n.startswith("conflict: skipped skill-improve of [cut-release]") for n in result.notes
    )


# ---- undo, and no LLM ------------------------------------------------------------------------
def test_undo_restores_the_exact_catalog(tmp_path: Path) -> None:
    three_overlapping(tmp_path)
    at_risk(tmp_path)
    SkillUsage(tmp_path).record_use("a", "deploy-frontend", "prompt")
    say(tmp_path, "s1", "Cut a release of the billing service with make release")
    say(tmp_path, "s2", "Cut the billing release again with make release")
    before = records(tmp_path)
    usage_before = SkillUsage(tmp_path).log.read()
    merged = {"description": "d", "body": "Use `make deploy-web`, 5 minutes, then the CDN."}
    handlers: dict[str, Handler] = {
        "gap": lambda r: {"toSave": [new_skill("billing-release", ["s1", "s2"])]},
        "consolidate": lambda r: {
            "toDelete": ["deploy-frontend"],
            "toSave": [
                merged | {"name": "deploy-site", "sourceNames": ["deploy-frontend"], "seeAlso": []}
            ],
        },
        "optimise": improved("0. Run `make test`.\n" + RELEASE),
    }
    with fake_openai(model(**handlers)) as (url, _):
        store, report = dream(tmp_path, url)
    kinds = sorted(c.kind for c in report.changes() if c.is_skill)
    assert kinds == ["skill-archive", "skill-create", "skill-improve", "skill-merge"]
    assert records(tmp_path) != before
    assert len(SkillUsage(tmp_path).log.read()) > len(usage_before)  # the merge's copied uses
    undo(store, report.run)
    assert records(tmp_path) == before
    assert SkillUsage(tmp_path).log.read() == usage_before


def test_undo_keeps_and_names_a_skill_changed_after_the_cycle(tmp_path: Path) -> None:
    at_risk(tmp_path)
    with fake_openai(model(optimise=improved("0. Run `make test`.\n" + RELEASE))) as (url, _):
        store, report = dream(tmp_path, url)
    SkillCatalog(tmp_path).archive("cut-release")
    after_user = records(tmp_path)
    done = undo(store, report.run)
    assert records(tmp_path) == after_user
    notes = " ".join(n for p in done.passes for n in p.notes)
    assert "undo skipped skill cut-release" in notes


def test_without_an_llm_only_usage_is_reported_and_nothing_changes(tmp_path: Path) -> None:
    three_overlapping(tmp_path)
    SkillUsage(tmp_path).record_use("a", "deploy-web", "prompt")
    say(tmp_path, "s1", "Cut a release of billing")
    say(tmp_path, "s2", "Cut a release of billing again")
    before = records(tmp_path)
    report = run_cycle(LongTermStore(tmp_path), None, options=QUIET)
    result = pass_of(report, "skill-gap")
    assert result.status == "skipped" and result.reason.startswith("no LLM")
    assert "usage: 1 skill(s) used in 30 days (deploy-web 1)" in result.notes[0]
    assert records(tmp_path) == before


def test_directive_files_replace_the_built_in_skill_prompts(tmp_path: Path) -> None:
    for name in ("skill-gap.md", "skill-dream.md", "skill-optimize.md"):
        (tmp_path / name).write_text(f"CUSTOM {name}")
    three_overlapping(tmp_path)
    say(tmp_path, "s1", "Cut a release of billing")
    say(tmp_path, "s2", "Cut a release of billing again")
    with fake_openai(model()) as (url, script):
        dream(tmp_path, url)
    systems = {kind_of(r): r["messages"][0]["content"] for r in script.requests}
    assert systems["gap"] == "CUSTOM skill-gap.md"
    assert systems["consolidate"] == "CUSTOM skill-dream.md"
    assert systems["optimise"] == "CUSTOM skill-optimize.md"


def test_a_bad_answer_for_one_skill_leaves_the_others_reviewed(tmp_path: Path) -> None:
    add_skill(tmp_path, "tidy-inbox", "Archive mail older than 30 days.", 30)
    add_skill(tmp_path, "water-plants", "Water the ficus every 7 days.", 30)

    def optimise(request: dict[str, Any]) -> Any:
        if "Skill tidy-inbox" in prompt_of(request):
            return {"broken": True}
        body = "1. Water the ficus every 7 days.\n2. Skip a week in winter."
        answer = json.dumps(
            {"water_plants": 0, "Name": "water-plants", "body": body, "reason": "r"}
        )
        return f"<think>the ficus</think>Here you go:\n```json\n{answer}\n```"  # lenient parsing

    with fake_openai(model(optimise=optimise)) as (url, _):
        _, report = dream(tmp_path, url)
    result = pass_of(report, "skill-optimisation")
    assert [c.kind for c in result.changes] == ["skill-improve"]
    assert any(n.startswith("skipped 'tidy-inbox'") for n in result.notes)
    body = SkillCatalog(tmp_path).get("water-plants").body
    assert body.strip().startswith("1. Water") and "Skip a week in winter" in body


def test_a_dry_run_plans_skill_changes_and_writes_nothing(tmp_path: Path) -> None:
    at_risk(tmp_path)
    before = records(tmp_path)
    with fake_openai(model(optimise=improved("0. Run `make test`.\n" + RELEASE))) as (url, _):
        store = LongTermStore(tmp_path)
        llm = OpenAILLM(url, "fake-model", 10.0)
        report = run_cycle(store, llm, dry_run=True, options=QUIET)
    planned = pass_of(report, "skill-optimisation").changes
    assert [c.kind for c in planned] == ["skill-improve"]
    assert planned[0].skill_after is not None and planned[0].skill_after["planned"] is True
    assert records(tmp_path) == before


def test_the_body_guard_knows_commands_paths_urls_and_numbers() -> None:
    from dreamwell.dream.skills.rules import body_facts, lost_facts

    body = (
        RELEASE + "```sh\n$ make deploy ENV=prod\n# a comment\n```\nSettings: ~/.config/app.toml\n"
    )
    facts = body_facts(body)
    wanted = {"main", "scripts/bump.sh 1.4.0", "git push origin v1.4.0", "15"}
    wanted |= {"https://ci.example.com/billing", "make deploy ENV=prod", "~/.config/app.toml"}
    assert wanted <= facts and "1" not in facts and "# a comment" not in facts  # "1." numbers
    assert lost_facts(body, body.replace("15 minutes", "20 minutes")) == ["15"]
    wrong = "the user said: never run git push origin v1.4.0 by hand"
    without_push = body.replace("`git push origin v1.4.0`", "the release button")
    assert lost_facts(body, without_push, wrong) == []  # the failure context names it wrong
    assert lost_facts(body, without_push) == ["git push origin v1.4.0"]


def test_the_catalog_writes_a_group_whole_and_reverts_exact_records(tmp_path: Path) -> None:
    add_skill(tmp_path, "deploy-web", "Run `make deploy-web`.")
    add_skill(tmp_path, "deploy-site", "Run `make deploy-web` too.")
    catalog = SkillCatalog(tmp_path)
    web, site = catalog.get("deploy-web"), catalog.get("deploy-site")
    catalog.archive("deploy-site")  # moves on: the group below must not be half written
    group = [
        SkillChange("deploy-web", web.revision, see_also=("deploy-site",)),
        SkillChange("deploy-site", site.revision, status="archived"),
    ]
    done = catalog.apply(group, whole=True)
    assert done.written == () and [c.name for c in done.conflicts] == ["deploy-site"]
    assert SkillCatalog(tmp_path).get("deploy-web") == web
    now = SkillCatalog(tmp_path).get("deploy-site")
    undone = catalog.revert([("deploy-site", now.revision, site), ("nope", None, None)])
    back = catalog.get("deploy-site")
    assert undone.conflicts == () and content_of(back) == content_of(site)
    assert back.revision > now.revision  # a revision never comes back
    with pytest.raises(SkillConflict):  # a writer still holding the undone revision
        catalog.archive("deploy-site", expect=now.revision)
    stale = catalog.revert([("deploy-web", web.revision + 5, None)])
    assert stale.conflicts and catalog.find("deploy-web") == web
    assert not catalog.revert([("deploy-web", web.revision, None)]).conflicts
    assert catalog.find("deploy-web") is None  # a skill the cycle created is removed


def test_the_skills_auto_approve_setting_reaches_the_command_line_dream(tmp_path: Path) -> None:
    say(tmp_path, "s1", "Cut a release of the billing service with make release")
    say(tmp_path, "s2", "Cut the billing release again with make release")
    answer = {"toSave": [new_skill("cut-billing-release", ["s1", "s2"])]}
    env = {**os.environ, "DREAMWELL_SKILLS_AUTO_APPROVE": "true", "DREAMWELL_EMBEDDER": "none"}
    with fake_openai(model(gap=lambda r: answer)) as (url, _):
        done = subprocess.run(
            [str(Path(sys.executable).with_name("dreamwell")), "dream", "--once", "--data-dir",
             str(tmp_path), "--llm-provider", "openai", "--llm-base-url", url,
             "--llm-model", "fake-model"],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert SkillCatalog(tmp_path).get("cut-billing-release").status == "active"
