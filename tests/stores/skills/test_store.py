"""The skills store: Agent Skills folders validated per docs/skills.md, byte-for-byte round trips,
compare-and-set, several processes, hybrid search, usage."""

from __future__ import annotations

import json
import multiprocessing
import os
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from dreamwell.stores import InvalidInput, NotFound
from dreamwell.stores.layout import DataDir
from dreamwell.stores.model import utcnow
from dreamwell.stores.skills.catalog import (
    ANY_REVISION,
    NEW,
    SkillCatalog,
    SkillChange,
    SkillConflict,
)
from dreamwell.stores.skills.folders import read_skills
from dreamwell.stores.skills.porting import export_skills, import_skills
from dreamwell.stores.skills.skill_md import InvalidSkill, strip_bookkeeping
from dreamwell.stores.skills.usage import SkillUsage
from tests.support.skill_samples import (
    RELEASE_MD,
    RUN_SH,
    RUNNABLE_MD,
    assert_runnable,
    long_skill,
    release_skill,
    runnable_skill,
    simple_md,
    write_skill,
)


def tree_bytes(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_import_then_export_round_trips_byte_for_byte_apart_from_dreamwell_keys(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src"
    folders = [release_skill(src), long_skill(src)]
    catalog = SkillCatalog(tmp_path / "data")
    imported = import_skills(catalog, src)
    assert sorted(s.name for s in imported) == ["cut-release", "deploy-guide"]
    out = export_skills(catalog, tmp_path / "out")
    assert sorted(p.name for p in out) == ["cut-release", "deploy-guide"]
    for folder in folders:
        original, exported = tree_bytes(folder), tree_bytes(tmp_path / "out" / folder.name)
        assert original.keys() == exported.keys()
        for rel, data in original.items():
            if rel != "SKILL.md":
                assert exported[rel] == data, rel
        text = exported["SKILL.md"].decode()
        assert "dreamwell-id:" in text and 'dreamwell-status: "active"' in text
        fm = yaml.safe_load(text.replace("\r\n", "\n").split("---\n")[1])
        assert fm["metadata"]["dreamwell-origin"] == "import"
        assert strip_bookkeeping(text)[0].encode() == original["SKILL.md"]
    assert len(catalog.get("deploy-guide").body) > 20_000


def test_reimporting_an_export_keeps_the_original_text(tmp_path: Path) -> None:
    catalog = SkillCatalog(tmp_path / "data")
    import_skills(catalog, release_skill(tmp_path / "src"))
    export_skills(catalog, tmp_path / "out")
    other = SkillCatalog(tmp_path / "other")
    import_skills(other, tmp_path / "out")
    assert other.get("cut-release").skill_md == RELEASE_MD


@pytest.mark.parametrize(
    ("name", "text", "rule"),
    [
        ("Cut-Release", simple_md("Cut-Release", "x"), "name-format"),
        ("cut-release", simple_md("other-name", "x"), "name-matches-folder"),
        ("cut-release", "---\nname: cut-release\n---\nbody\n", "description-required"),
        ("claude-helper", simple_md("claude-helper", "x"), "name-reserved"),
        ("recall", simple_md("recall", "x"), "name-reserved"),
        ("a--b", simple_md("a--b", "x"), "name-format"),
        ("tagged", simple_md("tagged", "Use <tool>x</tool> here"), "description-no-xml"),
        ("long", simple_md("long", "d" * 1025), "description-length"),
        ("nofm", "# just markdown\n", "front-matter"),
        ("meta", "---\nname: meta\ndescription: x\nmetadata:\n  v: 1.0\n---\n", "metadata"),
        ("bad-yaml", "---\nname: [unclosed\n---\n", "yaml"),
    ],
)
def test_bad_skills_are_refused_naming_the_rule_and_nothing_is_written(
    tmp_path: Path, name: str, text: str, rule: str
) -> None:
    src = tmp_path / "src"
    release_skill(src)  # a good one next to the bad one: neither is imported
    write_skill(src, name, text)
    catalog = SkillCatalog(tmp_path / "data")
    with pytest.raises(InvalidSkill) as caught:
        import_skills(catalog, src)
    assert caught.value.rule == rule and f"[rule: {rule}]" in str(caught.value)
    assert catalog.list() == [] and not (tmp_path / "data" / "skills").exists()


def test_a_zip_with_a_dotdot_path_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("evil/SKILL.md", simple_md("evil", "x"))
        zf.writestr("evil/../../escape.txt", "gotcha")
    with pytest.raises(InvalidSkill, match=r"\[rule: path\]"):
        import_skills(SkillCatalog(tmp_path / "data"), archive)
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "data").exists()


def test_a_zip_with_skill_folders_imports_them(tmp_path: Path) -> None:
    archive = tmp_path / "skills.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("one/SKILL.md", simple_md("one", "first"))
        zf.writestr("one/scripts/run.py", "print('hi')\n")
        zf.writestr("two/SKILL.md", simple_md("two", "second"))
    catalog = SkillCatalog(tmp_path / "data")
    import_skills(catalog, archive)
    assert [s.name for s in catalog.list()] == ["one", "two"]
    assert catalog.get("one").files["scripts/run.py"] == b"print('hi')\n"


def test_an_executable_script_stays_executable_through_import_and_export(
    tmp_path: Path,
) -> None:
    catalog = SkillCatalog(tmp_path / "data")
    import_skills(catalog, runnable_skill(tmp_path / "src"))
    assert catalog.get("run-tests").executable == {"scripts/run.sh"}
    export_skills(catalog, tmp_path / "out")
    assert_runnable(tmp_path / "out" / "run-tests")
    # exported over a folder whose modes are the other way round: put right
    (tmp_path / "out" / "run-tests" / "scripts" / "run.sh").chmod(0o644)
    (tmp_path / "out" / "run-tests" / "notes.md").chmod(0o775)
    export_skills(catalog, tmp_path / "out")
    assert_runnable(tmp_path / "out" / "run-tests")


def test_a_zips_unix_modes_say_which_files_are_executable(tmp_path: Path) -> None:
    archive = tmp_path / "skills.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path, data, mode in [
            ("run-tests/SKILL.md", RUNNABLE_MD, 0o644),
            ("run-tests/scripts/run.sh", RUN_SH, 0o755),
            ("run-tests/notes.md", "n\n", 0o644),
        ]:
            info = zipfile.ZipInfo(path)
            info.external_attr = (0o100000 | mode) << 16
            zf.writestr(info, data)
    catalog = SkillCatalog(tmp_path / "data")
    import_skills(catalog, archive)
    export_skills(catalog, tmp_path / "out")
    assert_runnable(tmp_path / "out" / "run-tests")


def test_a_record_without_modes_loads_with_nothing_executable(tmp_path: Path) -> None:
    catalog = SkillCatalog(tmp_path / "data")
    import_skills(catalog, runnable_skill(tmp_path / "src"))
    path = catalog.layout.skills / "run-tests.json"
    record = json.loads(path.read_text())
    assert record["files"]["scripts/run.sh"] == {"text": RUN_SH, "executable": True}
    assert record["files"]["notes.md"] == {"text": "n\n"}
    for item in record["files"].values():  # as records were written before modes travelled
        item.pop("executable", None)
    path.write_text(json.dumps(record))
    catalog.layout.skills_generation.write_text("7")
    old = SkillCatalog(tmp_path / "data").get("run-tests")
    assert old.executable == frozenset() and old.files["scripts/run.sh"] == RUN_SH.encode()
    export_skills(catalog, tmp_path / "out")
    assert not (tmp_path / "out" / "run-tests" / "scripts" / "run.sh").stat().st_mode & 0o111


def test_an_edit_of_the_text_keeps_the_executable_bits_and_revisions_carry_them(
    tmp_path: Path,
) -> None:
    catalog = SkillCatalog(tmp_path / "data")
    made = import_skills(catalog, runnable_skill(tmp_path / "src"))[0]
    md = RUNNABLE_MD.replace("Run `scripts", "Always run `scripts").encode()
    edited = catalog.apply(
        [SkillChange("run-tests", made.revision, {**made.files, "SKILL.md": md})]
    )
    assert edited.written[0].executable == {"scripts/run.sh"}  # the browser's and dream's edits
    chmod = SkillChange("run-tests", ANY_REVISION, dict(made.files), executable=frozenset())
    assert catalog.apply([chmod]).written[0].executable == frozenset()
    assert catalog.revert([("run-tests", 3, made)]).written[0].executable == {"scripts/run.sh"}
    assert SkillCatalog(tmp_path / "data").get("run-tests").executable == {"scripts/run.sh"}


def test_a_20_mb_file_is_refused(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "src", "big", simple_md("big", "x"))
    with (folder / "assets.bin").open("wb") as fh:
        fh.truncate(20 * 1024 * 1024)
    with pytest.raises(InvalidSkill, match=r"\[rule: file-size\]"):
        import_skills(SkillCatalog(tmp_path / "data"), folder)


def test_a_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("password")
    folder = write_skill(tmp_path / "src", "linky", simple_md("linky", "x"))
    os.symlink(secret, folder / "notes.txt")
    with pytest.raises(InvalidSkill, match=r"\[rule: symlink\]"):
        read_skills(folder)


def test_an_existing_name_is_refused_unless_replaced(tmp_path: Path) -> None:
    catalog = SkillCatalog(tmp_path / "data")
    folder = write_skill(tmp_path / "src", "one", simple_md("one", "first"))
    import_skills(catalog, folder)
    with pytest.raises(InvalidInput, match="--replace"):
        import_skills(catalog, folder)
    (folder / "SKILL.md").write_text(simple_md("one", "second"))
    assert import_skills(catalog, folder, replace=True)[0].revision == 2
    assert catalog.get("one").description == "second"


def test_compare_and_set_refuses_a_moved_revision_and_reports_conflicts(tmp_path: Path) -> None:
    catalog = SkillCatalog(tmp_path / "data")
    for n in ("alpha", "beta", "gamma"):
        catalog.apply([SkillChange(n, NEW, {"SKILL.md": simple_md(n, n).encode()})])
    catalog.pin("gamma")
    read = {s.name: s.revision for s in catalog.list()}
    catalog.apply(
        [SkillChange("alpha", ANY_REVISION, {"SKILL.md": simple_md("alpha", "user").encode()})]
    )
    result = catalog.apply(
        [
            SkillChange("alpha", read["alpha"], {"SKILL.md": simple_md("alpha", "dream").encode()}),
            SkillChange("beta", read["beta"], status="archived"),
            SkillChange("gamma", read["gamma"], status="archived"),
            SkillChange("delta", NEW, {"SKILL.md": simple_md("delta", "new").encode()}),
        ],
        refuse_pinned=True,
    )
    assert [s.name for s in result.written] == ["beta", "delta"]
    found = {c.name: c.found for c in result.conflicts}
    assert found == {"alpha": read["alpha"] + 1, "gamma": read["gamma"]}
    assert catalog.get("alpha").description == "user"
    assert catalog.get("beta").status == "archived" and catalog.get("gamma").status == "active"
    with pytest.raises(SkillConflict, match="changed since it was read"):
        catalog.archive("alpha", expect=read["alpha"])


def test_status_changes_and_lookups(tmp_path: Path) -> None:
    catalog = SkillCatalog(tmp_path / "data")
    folder = read_skills(write_skill(tmp_path / "src", "cand", simple_md("cand", "x")))[0]
    catalog.put(folder, status="candidate", origin="dream")
    assert catalog.list("active") == [] and catalog.get("cand").status == "candidate"
    assert catalog.approve("cand").status == "active"
    with pytest.raises(InvalidInput, match="not a candidate"):
        catalog.approve("cand")
    catalog.archive("cand")
    assert catalog.list("active") == [] and catalog.get("cand").status == "archived"
    with pytest.raises(NotFound, match="no skill named 'nope'"):
        catalog.get("nope")


def _writer(data: str, names: list[str]) -> None:
    catalog = SkillCatalog(Path(data))
    for n in names:
        catalog.apply([SkillChange(n, NEW, {"SKILL.md": simple_md(n, n).encode()})])


def test_several_processes_write_without_losing_a_skill(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_writer, args=(data, [f"p{i}-s{j}" for j in range(10)]))
        for i in range(3)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    catalog = SkillCatalog(tmp_path / "data")
    assert len(catalog.list()) == 30 and catalog.generation() == 30


def test_a_reader_sees_another_catalogs_write_through_the_generation(tmp_path: Path) -> None:
    reader, writer = SkillCatalog(tmp_path / "d"), SkillCatalog(tmp_path / "d")
    assert reader.list() == []
    writer.apply([SkillChange("late", NEW, {"SKILL.md": simple_md("late", "x").encode()})])
    assert [s.name for s in reader.list()] == ["late"]


def test_search_finds_skills_by_name_description_and_body(tmp_path: Path) -> None:
    catalog = SkillCatalog(tmp_path / "data")
    import_skills(catalog, release_skill(tmp_path / "src"))
    import_skills(catalog, long_skill(tmp_path / "src2"))
    import_skills(
        catalog, write_skill(tmp_path / "s3", "brew-tea", simple_md("brew-tea", "Steep tea"))
    )
    assert catalog.search("how do I ship billing?")[0][0].name == "cut-release"
    assert catalog.search("healthz")[0][0].name == "deploy-guide"
    assert catalog.search("brew")[0][0].name == "brew-tea"
    catalog.archive("brew-tea")
    assert catalog.search("brew") == []


def test_usage_counts_uses_last_use_and_co_used_pairs(tmp_path: Path) -> None:
    usage = SkillUsage(DataDir(tmp_path))
    now = utcnow()
    usage.record_use("s1", "a", "prompt", now=now - timedelta(days=40))
    usage.record_use("s1", "b", "resource", now=now)
    usage.record_use("s2", "a", "hook", now=now)
    usage.record_use("s2", "b", "prompt", now=now)
    usage.record_use("s2", "c", "prompt", now=now)
    stats = SkillUsage(DataDir(tmp_path)).stats()
    assert stats.uses_30d == {"a": 1, "b": 2, "c": 1}
    assert stats.last_used["a"] == now.isoformat()
    assert stats.co_used[0] == ("a", "b", 2)
    with pytest.raises(InvalidInput, match="via must be"):
        usage.record_use("s", "a", "email")


class ConceptEmbedder:
    """Deterministic stand-in for a model: one dimension per concept, so a query finds a
    skill by meaning with no word in common."""

    name = "concepts"
    dim = 3
    ready = True
    CONCEPTS = ({"refund", "invoice", "billing", "money"}, {"tea", "brew", "steep"}, set())

    def _vector(self, text: str) -> list[float]:
        words = set(text.lower().replace(".", " ").replace("?", " ").split())
        v = [float(len(words & c)) for c in self.CONCEPTS]
        v[2] = 0.1
        norm = sum(x * x for x in v) ** 0.5
        return [x / norm for x in v]

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls = getattr(self, "calls", 0) + len(texts)
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def test_search_is_hybrid_and_embeds_a_large_catalog_over_several_searches(
    tmp_path: Path,
) -> None:
    embedder = ConceptEmbedder()
    catalog = SkillCatalog(tmp_path / "d", embedder, min_similarity=0.5)  # type: ignore[arg-type]
    changes = [
        SkillChange(f"filler-{i}", NEW, {"SKILL.md": simple_md(f"filler-{i}", "Steep").encode()})
        for i in range(20)
    ]
    md = simple_md("send-invoice", "Send the monthly invoice")
    catalog.apply([*changes, SkillChange("send-invoice", NEW, {"SKILL.md": md.encode()})])
    first = catalog.search("refund money")  # 16 of the 21 embedded: not this one yet
    assert "send-invoice" not in [k.name for k, _ in first]
    assert catalog.search("refund money")[0][0].name == "send-invoice"  # by meaning alone
    assert embedder.calls == 21


def test_undo_can_remove_a_created_skill_and_a_merge_keeps_the_earliest_creation(
    tmp_path: Path,
) -> None:
    catalog = SkillCatalog(tmp_path / "d")
    md = {"SKILL.md": simple_md("merged", "x").encode()}
    made = catalog.apply([SkillChange("merged", NEW, md, created_at="2020-01-02T00:00:00+00:00")])
    skill = made.written[0]
    assert skill.created_at == "2020-01-02T00:00:00+00:00"
    stale = catalog.apply([SkillChange("merged", skill.revision + 5, remove=True)])
    assert stale.conflicts and catalog.find("merged") is not None
    gone = catalog.apply([SkillChange("merged", skill.revision, remove=True)])
    assert gone.written == (skill,) and catalog.find("merged") is None
