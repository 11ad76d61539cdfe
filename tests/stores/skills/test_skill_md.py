"""Hostile SKILL.md front matter is data, never a hazard (issue 45): a YAML alias bomb, deep
nesting or a huge front matter is refused in one line, at once, and a record stored by an
older version with such a front matter is skipped by the catalog instead of eating memory."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from dreamwell.stores.skills.catalog import SkillCatalog
from dreamwell.stores.skills.folders import read_folder
from dreamwell.stores.skills.porting import import_skills
from dreamwell.stores.skills.skill_md import InvalidSkill
from tests.support.cli import dreamwell
from tests.support.skill_samples import simple_md, write_skill

BOUND = 5.0  # seconds; the bomb took 60-100 s of CPU (and all memory) before


def bomb_lines() -> str:
    """Nine levels of nine aliases: 9**9 items once expanded (the QA report's t2_bomb)."""
    lines = ["a0: &a0 [l,l,l,l,l,l,l,l,l]"]
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


BOMBS = {
    "when_to_use": f"---\nname: bomb\ndescription: x.\n{bomb_lines()}when_to_use: *a8\n---\nbody\n",
    "metadata": f"---\nname: bomb\ndescription: x.\n{bomb_lines()}metadata: {{x: *a8}}\n---\nb\n",
    "nested": "---\nname: bomb\ndescription: x.\ndeep: " + "[" * 5000 + "]" * 5000 + "\n---\nb\n",
    "wide": "---\nname: bomb\ndescription: x.\nwide: [" + "1," * 20000 + "1]\n---\nb\n",
    "huge": "---\nname: bomb\ndescription: x.\nnote: '" + "x" * 70_000 + "'\n---\nb\n",
}


@pytest.mark.parametrize("case", sorted(BOMBS))
def test_a_hostile_front_matter_is_refused_at_once_in_one_line(tmp_path: Path, case: str) -> None:
    folder = write_skill(tmp_path / "src", "bomb", BOMBS[case])
    started = time.monotonic()
    with pytest.raises(InvalidSkill) as refused:
        read_folder(folder)
    assert time.monotonic() - started < BOUND
    text = str(refused.value)
    assert "\n" not in text and len(text) < 400 and "[rule: " in text


def test_the_cli_refuses_an_alias_bomb_in_one_line_and_imports_nothing(tmp_path: Path) -> None:
    src = tmp_path / "src"
    write_skill(src, "bomb", BOMBS["when_to_use"])
    write_skill(src, "good-one", simple_md("good-one", "A good skill"))
    data = ["--data-dir", str(tmp_path / "d")]
    done = dreamwell("skills", "import", str(src), *data, timeout=60)
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "aliases" in done.stderr, done.stderr
    assert dreamwell("skills", "list", *data).stdout.startswith("No skills yet")


def test_a_stored_bomb_is_skipped_not_expanded(tmp_path: Path) -> None:
    catalog = SkillCatalog(tmp_path / "d")
    write_skill(tmp_path / "src", "bomb", simple_md("bomb", "Soon a bomb"))
    write_skill(tmp_path / "src", "good-one", simple_md("good-one", "A good skill"))
    import_skills(catalog, tmp_path / "src")
    record = tmp_path / "d" / "skills" / "bomb.json"
    stored = json.loads(record.read_text())  # as an older version would have stored it
    stored["files"]["SKILL.md"] = {"text": BOMBS["when_to_use"]}
    record.write_text(json.dumps(stored))
    started = time.monotonic()
    names = [s.name for s in SkillCatalog(tmp_path / "d").list()]
    assert time.monotonic() - started < BOUND
    assert names == ["good-one"]
