"""Real-world-shaped skill folders for the tests (scripts, references, non-ASCII, long bodies)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dreamwell.stores.skills.record import Skill, skill_to_json

RELEASE_MD = """---
name: cut-release
description: Cut a release of the billing service. Use when the user asks to ship, tag or \
release billing.
license: Apache-2.0
allowed-tools: Bash(git:*) Read
metadata:
  author: "ops team"
  version: "1.2"
---

# Cutting a billing release

1. Run `scripts/bump.sh 1.4.0` on a clean `main`.
2. Read [the checklist](references/checklist.md) — every box, café-grade thoroughness: ✓.
3. Push the tag: `git push origin v1.4.0`; watch https://ci.example.com/billing for 15 minutes.
"""

BUMP_SH = '#!/bin/sh\nset -eu\nsed -i "s/^version = .*/version = \\"$1\\"/" pyproject.toml\n'
CHECKLIST = "# Checklist\n\n- [ ] changelog\n- [ ] migrations ran on staging\n"


def write_skill(root: Path, name: str, text: str, extra: dict[str, bytes] | None = None) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_bytes(text.encode("utf-8"))
    for rel, data in (extra or {}).items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return folder


def release_skill(root: Path) -> Path:
    return write_skill(
        root,
        "cut-release",
        RELEASE_MD,
        {
            "scripts/bump.sh": BUMP_SH.encode(),
            "references/checklist.md": CHECKLIST.encode(),
            "assets/logo.png": bytes(range(256)) * 4,
        },
    )


def simple_md(name: str, description: str, body: str = "Do the thing.\n") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}"


def long_skill(root: Path) -> Path:
    """A 20 KB body in Japanese and English, CRLF line endings."""
    para = "デプロイ手順: run `make deploy ENV=prod` then verify /healthz returns 200.\r\n"
    body = "".join(f"## Step {i}\r\n{para}" for i in range(20_000 // len(para) + 1))
    text = (
        "---\r\nname: deploy-guide\r\ndescription: 本番環境へのデプロイ手順 (deploy to "
        "production).\r\ncompatibility: needs make and curl\r\n---\r\n" + body
    )
    return write_skill(root, "deploy-guide", text)


def content_of(skill: Skill) -> str:
    """A skill's whole record but its revision: an undo puts the content back under a new
    revision (a revision never comes back, so a writer holding an old one is refused)."""
    return skill_to_json(replace(skill, revision=0))


RUN_SH = "#!/bin/sh\nset -eu\nexec make test\n"
RUNNABLE_MD = simple_md("run-tests", "Run the test suite", "Run `scripts/run.sh`.\n")


def runnable_skill(root: Path) -> Path:
    """A skill whose `scripts/run.sh` is executable (and setuid, group- and other-writable,
    none of which may travel) beside a plain `notes.md`."""
    folder = write_skill(
        root, "run-tests", RUNNABLE_MD, {"scripts/run.sh": RUN_SH.encode(), "notes.md": b"n\n"}
    )
    (folder / "scripts" / "run.sh").chmod(0o4777)
    (folder / "notes.md").chmod(0o644)
    return folder


def assert_runnable(folder: Path) -> None:
    """`scripts/run.sh` executable by its owner, `notes.md` by nobody, and neither setuid,
    setgid, sticky nor writable by group or others."""
    run, notes = (
        (folder / "scripts" / "run.sh").stat().st_mode,
        (folder / "notes.md").stat().st_mode,
    )
    assert run & 0o100, oct(run)
    assert not notes & 0o111, oct(notes)
    assert not (run | notes) & 0o7022, (oct(run), oct(notes))
