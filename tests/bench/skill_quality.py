"""The skills scenario of dream_quality_bench.py: the three skill passes on a labelled catalog
and conversation log in a temporary data directory, every proposed change scored.

Conversations: two kinds of request recur across sessions (cutting a billing release in s1/s2,
the weekly on-call summary in s3/s4), one does not (a haiku, s5); s6 used `publish-docs` and the
user corrected the agent. Skills: three overlapping deploy procedures and one distinct
(`rotate-keys`), a sparse old skill (`tidy-inbox`) and the at-risk `publish-docs`.

Scores: right/wrong skill creations (a right one cites the sessions of one recurring kind),
recurring kinds missed, right/wrong merges (right: only deploy-* skills), improvements accepted
and refused, facts (commands, paths, URLs, numbers) of the original bodies lost from the live
catalog, JSON failures, seconds per pass.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from dreamwell.dream.feeding import mine_corrections
from dreamwell.dream.llm import LLM
from dreamwell.dream.report import PassResult, Report
from dreamwell.dream.skills.passes import SKILL_PASSES, run_skill_passes
from dreamwell.dream.skills.rules import body_facts
from dreamwell.stores import utcnow
from dreamwell.stores.skills.catalog import NEW, SkillCatalog, SkillChange
from dreamwell.stores.skills.folders import make_folder
from dreamwell.stores.skills.usage import SkillUsage

KINDS = ({"s1", "s2"}, {"s3", "s4"})  # the recurring kinds of request
OVERLAPPING = {"deploy-web", "deploy-site", "deploy-frontend"}
CONVERSATION = [
    (
        "s1",
        "Cut a release of the billing service: run `scripts/bump.sh 2.3.0` then "
        "`git push origin v2.3.0`",
    ),
    ("s1", "and post in #billing when CI is green"),
    ("s2", "Time to cut the billing release again, same as last time with scripts/bump.sh"),
    ("s3", "Summarize this week's on-call incidents from the pager log"),
    ("s4", "Can you summarize the on-call incidents for the week? Group them by service."),
    ("s5", "Write a haiku about spring rain"),
    ("s6", "Publish the docs site"),
    (
        "s6",
        "No, you forgot to build with `mkdocs build --strict` first, it failed on a broken link",
    ),
]
SKILLS = [  # (name, description, body, days old)
    (
        "deploy-web",
        "Deploy the web site. Use when asked to deploy or ship the site.",
        "1. Run `make deploy-web` from the repo root.\n2. Check https://web.example.com loads.\n",
        60,
    ),
    (
        "deploy-site",
        "Ship the website to production. Use for site deploys.",
        "Deploy the site with `make deploy-web`; it takes about 5 minutes.\n"
        "Then purge the CDN cache with `cdnctl purge web`.\n",
        40,
    ),
    (
        "deploy-frontend",
        "Deploy the frontend (the web site). Use when the frontend must ship.",
        "Run `make deploy-web`. If the deploy hangs, check `/var/log/deploy.log`.\n",
        20,
    ),
    (
        "rotate-keys",
        "Rotate the billing API keys. Use every quarter or after a leak.",
        "1. Run `vault rotate billing/api` (needs the ops role).\n2. Restart `billing-api` with "
        "`systemctl restart billing-api`.\n3. Keys older than 90 days are revoked.\n"
        "4. Tell #security the rotation is done, and record it in the ops log.\n",
        100,
    ),
    (
        "tidy-inbox",
        "Tidy the inbox. Use when asked to clean up mail.",
        "Archive mail older than 30 days.\n",
        30,
    ),
    (
        "publish-docs",
        "Publish the documentation site. Use when asked to publish docs.",
        "1. Run `mkdocs gh-deploy` from `docs/`.\n2. Check https://docs.example.com.\n"
        "3. Announce it in #docs with the version number.\n",
        50,
    ),
]
USES = [
    ("u1", "deploy-web"),
    ("u1", "deploy-site"),
    ("u2", "deploy-web"),
    ("u2", "deploy-site"),
    ("u3", "deploy-frontend"),
    ("s6", "publish-docs"),
    ("u4", "rotate-keys"),
]


def seed(data: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    catalog, now = SkillCatalog(data), utcnow()
    for name, description, body, days in SKILLS:
        md = f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\n\n{body}"
        folder = make_folder(name, {"SKILL.md": md.encode()}, name)
        made = (now - timedelta(days=days)).isoformat()
        catalog.apply([SkillChange(name, NEW, dict(folder.files), "active", created_at=made)])
    usage = SkillUsage(data)
    for i, (session, skill) in enumerate(USES):
        usage.record_use(session, skill, "prompt", now=now - timedelta(days=2, minutes=i))
    start = now - timedelta(hours=5)
    log = [
        {
            "session": s,
            "role": "user",
            "content": c,
            "ts": (start + timedelta(minutes=i)).isoformat(),
        }
        for i, (s, c) in enumerate(CONVERSATION)
    ]
    return log, []


def careless_skills_model(request: dict[str, Any]) -> str:
    """A careless model's skill answers: a skill per session whatever recurs, merges of
    unrelated skills, rewrites that drop commands, an invented URL."""
    props = request["response_format"]["json_schema"]["schema"]["properties"]
    prompt = request["messages"][-1]["content"]
    item = props.get("toSave", {}).get("items", {}).get("properties", {})
    if {"body", "reason"} <= set(props):
        name = re.search(r"Skill (\S+)", prompt).group(1)  # type: ignore[union-attr]
        body = prompt.split("Body:\n", 1)[1].split("\n\n###", 1)[0]
        if name == "publish-docs":
            body = "0. Run `mkdocs build --strict` and fix every warning.\n" + body
        else:
            body = "Clean up the inbox regularly, and keep it tidy."
        return json.dumps({"name": name, "body": body, "reason": "a step was missing"})
    if "sessions" in item:
        return json.dumps(
            {
                "toSave": [
                    {
                        "name": "cut-billing-release",
                        "description": "Cut a release of the billing service",
                        "body": "1. Run `scripts/bump.sh <version>`.\n"
                        "2. `git push origin v<version>`.\n3. Post in #billing when CI is green.",
                        "sessions": ["s1", "s2"],
                    },
                    {
                        "name": "oncall-summary",
                        "description": "Summarize the week's on-call incidents",
                        "body": "Read the pager log at https://pager.example.com/export, "
                        "group by service.",
                        "sessions": ["s3", "s4"],
                    },
                    {
                        "name": "spring-haiku",
                        "description": "Write haiku",
                        "body": "Write 3 lines.",
                        "sessions": ["s5"],
                    },
                    {
                        "name": "haiku-release",
                        "description": "Write a haiku about spring",
                        "body": "Write it.",
                        "sessions": ["s5", "s1"],
                    },
                ]
            }
        )
    if "sourceNames" in item:
        bodies = dict(
            re.findall(
                r"## (\S+) \(.*?\n(?:description: [^\n]*\n)?(.*?)(?=\n## |\n\nCo-used)",
                prompt,
                re.S,
            )
        )
        deploy = "\n".join(bodies.get(n, "") for n in sorted(OVERLAPPING))
        return json.dumps(
            {
                "toDelete": ["deploy-site", "deploy-frontend"],
                "toSave": [
                    {
                        "name": "deploy-web",
                        "description": "Deploy the web site",
                        "body": deploy,
                        "sourceNames": sorted(OVERLAPPING),
                        "seeAlso": ["publish-docs"],
                    },
                    {
                        "name": "maintenance",
                        "description": "Keys and mail",
                        "body": bodies.get("rotate-keys", "") + "\n" + bodies.get("tidy-inbox", ""),
                        "sourceNames": ["rotate-keys", "tidy-inbox"],
                        "seeAlso": [],
                    },
                    {
                        "name": "publish-docs",
                        "description": "Publish docs",
                        "body": "Publish the docs.",
                        "sourceNames": ["publish-docs"],
                        "seeAlso": [],
                    },
                ],
            }
        )
    return json.dumps({"toDelete": [], "toSave": []})


def careful_skills_model(request: dict[str, Any]) -> str:
    """The same answers minus the careless model's mistakes: what a model that follows the
    contract would propose (the top of each score)."""
    answer = json.loads(careless_skills_model(request))
    if "reason" in answer and answer["body"].startswith("Clean up"):
        prompt = request["messages"][-1]["content"]
        body = prompt.split("Body:\n", 1)[1].split("\n\n###", 1)[0]
        answer["body"] = body + "\nEdge cases: ask before archiving anything flagged or unread."
    elif "toDelete" in answer:
        answer["toSave"] = answer["toSave"][:1]
    elif "toSave" in answer:
        answer["toSave"] = answer["toSave"][:2]
        answer["toSave"][1]["body"] = "Read the pager log and group the incidents by service."
    return json.dumps(answer)


@dataclass
class SkillScore:
    right_creations: int = 0
    wrong_creations: int = 0
    kinds_missed: int = 0
    right_merges: int = 0
    wrong_merges: int = 0
    improvements_accepted: int = 0
    improvements_refused: int = 0
    facts_lost: int = 0
    refused: int = 0
    json_failures: int = 0


def score(results: list[PassResult], catalog: SkillCatalog) -> SkillScore:
    s = SkillScore()
    found: set[int] = set()
    for r in results:
        s.json_failures += int(r.status == "failed")
        s.json_failures += sum(
            n.startswith(("retried a bad", "skipped a chunk", "skipped '")) for n in r.notes
        )
        s.refused += sum(n.startswith(("refused", "ignored")) for n in r.notes)
        s.improvements_refused += sum(n.startswith("refused improvement") for n in r.notes)
        for c in r.changes:
            cited = set(c.sources)
            if c.kind == "skill-create":
                kind = next(
                    (i for i, k in enumerate(KINDS) if len(cited) >= 2 and cited <= k), None
                )
                s.right_creations += kind is not None
                s.wrong_creations += kind is None
                found |= {kind} if kind is not None else set()
            elif c.kind == "skill-merge":
                good = len(cited) >= 2 and cited <= OVERLAPPING
                s.right_merges += good
                s.wrong_merges += not good
            elif c.kind == "skill-improve":
                s.improvements_accepted += 1
    s.kinds_missed = len(KINDS) - len(found)
    live = "\n".join(k.body for k in catalog.list(("active", "candidate")))
    have = " ".join(live.split()).lower()
    s.facts_lost = sum(
        1
        for _, _, body, _ in SKILLS
        for f in body_facts(body)
        if " ".join(f.split()).lower() not in have
    )
    return s


def run_skills(llm: LLM) -> tuple[SkillScore, dict[str, float], list[PassResult]]:
    with tempfile.TemporaryDirectory(prefix="skill-quality-") as tmp:
        data = Path(tmp)
        log, feedback = seed(data)
        report = Report("bench", utcnow().isoformat(), False, llm.name)
        seconds: dict[str, float] = {}
        clock = [time.monotonic(), ""]

        def progress(name: str) -> None:
            if clock[1]:
                seconds[str(clock[1])] = time.monotonic() - float(clock[0])
            clock[0], clock[1] = time.monotonic(), name

        run_skill_passes(
            data, llm, "", report, (log, feedback, mine_corrections(log)), utcnow(), progress
        )
        progress("")
        results = [p for p in report.passes if p.name in SKILL_PASSES]
        return score(results, SkillCatalog(data)), seconds, results
