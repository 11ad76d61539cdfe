"""`dreamwell export` / `dreamwell import`: an exact round trip, the peers' formats detected by
content, bad lines by number, idempotence and reinforcement."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from dreamwell.server.cli import porting
from dreamwell.server.cli.formats import read_records
from dreamwell.server.cli.porting import write_batches
from dreamwell.stores import (
    PROJECT,
    LongTermStore,
    MemoryEntry,
    OnnxE5,
    OnnxMiniLM,
    entry_to_dict,
    utcnow,
)
from tests.support.cli import exit_code

T0 = datetime(2026, 3, 1, 12, 30, 15, 123456, tzinfo=timezone.utc)


def store(data: Path) -> LongTermStore:
    return LongTermStore(data, embedder=None)


def rich_entries() -> list[MemoryEntry]:
    """Entries with every field away from its default, one archived."""
    return [
        MemoryEntry(
            id="a1b2c3d4e5f6",
            content="User lives in Zürich — “quoted”, emoji 🙂",
            category="user-preferences/location",
            tags=("place", "home"),
            created_at=T0,
            updated_at=T0 + timedelta(days=3),
            last_seen_at=T0 + timedelta(days=2),
            reinforcement_count=4,
            importance=0.83,
            score=-1.25,
            last_used_at=T0 + timedelta(days=5, microseconds=7),
            decayed_at=T0 + timedelta(days=1),
            metadata={"merged_from": "aaaaaaaaaaaa,bbbbbbbbbbbb", "subjectTime": "2026-02"},
        ),
        MemoryEntry(
            id="0f0f0f0f0f0f",
            content="An archived fact",
            category=None,
            tags=(),
            created_at=T0 - timedelta(days=400),
            updated_at=T0,
            last_seen_at=T0 - timedelta(days=100),
            archived_at=T0 + timedelta(hours=1),
            metadata={"derived_from": "a1b2c3d4e5f6"},
        ),
    ]


def test_export_then_import_round_trips_every_field(tmp_path: Path) -> None:
    store(tmp_path / "a").apply(rich_entries())
    out = tmp_path / "out.jsonl"
    assert (
        exit_code("export", "--data-dir", str(tmp_path / "a"), "--include-archived", "-o", str(out))
        == 0
    )
    assert len(out.read_text().splitlines()) == 2
    assert exit_code("import", str(out), "--data-dir", str(tmp_path / "b")) == 0
    back = {e.id: e for e in store(tmp_path / "b").entries(include_archived=True)}
    for original in rich_entries():
        assert entry_to_dict(back[original.id]) == entry_to_dict(original)
        assert back[original.id] == original


def test_export_leaves_archived_entries_out_unless_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store(tmp_path).apply(rich_entries())
    capsys.readouterr()
    assert exit_code("export", "--data-dir", str(tmp_path)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(x)["id"] for x in lines] == ["a1b2c3d4e5f6"]


def test_importing_the_same_file_twice_adds_nothing(tmp_path: Path) -> None:
    source = tmp_path / "graph.json"
    source.write_text(
        '{"type":"entity","name":"John_Smith","entityType":"person",'
        '"observations":["Speaks fluent Spanish","Graduated in 2019"]}\n'
        '{"type":"relation","from":"John_Smith","to":"Anthropic","relationType":"works_at"}\n'
    )
    data = str(tmp_path / "d")
    assert exit_code("import", str(source), "--data-dir", data) == 0
    first = {e.id: e for e in store(Path(data)).entries(include_archived=True)}
    assert exit_code("import", str(source), "--data-dir", data) == 0
    again = {e.id: e for e in store(Path(data)).entries(include_archived=True)}
    assert again == first and len(first) == 3


def test_knowledge_graph_entities_become_memories_with_their_type_as_category(
    tmp_path: Path,
) -> None:
    source = tmp_path / "memory.json"  # the older single-document form
    source.write_text(
        json.dumps(
            {
                "entities": [
                    {"name": "Ada", "entityType": "Person", "observations": ["Likes tea"]}
                ],
                "relations": [{"from": "Ada", "to": "Bob", "relationType": "knows"}],
            }
        )
    )
    assert exit_code("import", str(source), "--data-dir", str(tmp_path / "d")) == 0
    got = {e.content: e for e in store(tmp_path / "d").entries()}
    assert got["Ada: Likes tea"].category == "Person"
    assert got["Ada: Likes tea"].tags == ("ada",)
    assert got["Ada knows Bob"].category == "relations"
    assert got["Ada knows Bob"].metadata["source"] == "knowledge-graph"


def test_memory_service_export_is_detected_by_content_not_name(tmp_path: Path) -> None:
    source = tmp_path / "backup.txt"
    source.write_text(
        json.dumps(
            {
                "export_metadata": {"source_machine": "x", "total_memories": 2},
                "memories": [
                    {
                        "content": "Deploys happen on Fridays",
                        "content_hash": "ab12",
                        "tags": ["ops", "deploy"],
                        "memory_type": "note",
                        "created_at": 1767225600.0,
                    },
                    {
                        "content": "Staging DB is pg-2",
                        "content_hash": "cd34",
                        "tags": "infra,db",
                        "created_at_iso": "2025-12-31T10:00:00Z",
                    },
                ],
            }
        )
    )
    assert exit_code("import", str(source), "--data-dir", str(tmp_path / "d")) == 0
    got = {e.content: e for e in store(tmp_path / "d").entries()}
    fridays = got["Deploys happen on Fridays"]
    assert fridays.tags == ("ops", "deploy") and fridays.category == "note"
    assert fridays.created_at == datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert got["Staging DB is pg-2"].tags == ("infra", "db")
    assert got["Staging DB is pg-2"].created_at == datetime(2025, 12, 31, 10, tzinfo=timezone.utc)


def test_bad_lines_are_named_by_number_and_nothing_is_imported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = json.dumps(entry_to_dict(rich_entries()[0]))
    bad_importance = json.dumps(entry_to_dict(rich_entries()[1]) | {"importance": 7})
    source = tmp_path / "mixed.jsonl"
    source.write_text(f'{good}\nnot json\n\n{bad_importance}\n{{"what": 1}}\n')
    data = tmp_path / "d"
    assert exit_code("import", str(source), "--data-dir", str(data)) == 1
    err = capsys.readouterr().err
    assert "line 2: not JSON" in err
    assert "line 4: importance: Input should be less than or equal to 1" in err
    assert "line 5: not a dreamwell, knowledge-graph or mcp-memory-service record" in err
    assert "3 bad record(s), nothing imported; fix them or pass --skip-bad" in err
    assert not data.exists()
    assert exit_code("import", str(source), "--data-dir", str(data), "--skip-bad") == 0
    assert [e.id for e in store(data).entries(include_archived=True)] == ["a1b2c3d4e5f6"]


def test_the_same_text_in_the_same_category_reinforces_the_live_entry(tmp_path: Path) -> None:
    data = tmp_path / "d"
    saved = store(data).save("Speaks fluent Spanish", category="person").entry
    source = tmp_path / "s.json"
    source.write_text(
        json.dumps([{"content": "speaks  fluent spanish!", "memory_type": "person", "tags": ["x"]}])
    )
    assert exit_code("import", str(source), "--data-dir", str(data)) == 0
    assert exit_code("import", str(source), "--data-dir", str(data)) == 0
    (only,) = store(data).entries(include_archived=True)
    assert only.id == saved.id
    assert only.reinforcement_count == 2
    assert only.tags == ("x",)


def test_a_newer_version_of_a_known_entry_replaces_it_and_an_older_does_not(
    tmp_path: Path,
) -> None:
    original = rich_entries()[0]
    store(tmp_path).apply([original])
    newer = entry_to_dict(original) | {"importance": 0.1, "updated_at": "2027-01-01T00:00:00+00:00"}
    older = entry_to_dict(original) | {"importance": 0.9, "updated_at": "2020-01-01T00:00:00+00:00"}
    records, bad = read_records(json.dumps(older) + "\n" + json.dumps(newer) + "\n")
    assert bad == [] and len(records) == 2
    source = tmp_path / "v.jsonl"
    source.write_text(json.dumps(older) + "\n")
    assert exit_code("import", str(source), "--data-dir", str(tmp_path)) == 0
    assert store(tmp_path).get(original.id) == original
    source.write_text(json.dumps(newer) + "\n")
    assert exit_code("import", str(source), "--data-dir", str(tmp_path)) == 0
    got = store(tmp_path).get(original.id)
    assert got is not None and got.importance == 0.1


def test_an_unreadable_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code("import", str(tmp_path / "nope.jsonl"), "--data-dir", str(tmp_path / "d")) == 1
    err = capsys.readouterr().err
    assert err.startswith("dreamwell: cannot read") and err.count("\n") == 1


@pytest.mark.parametrize("embedder", ["e5", "minilm"])
def test_with_vectors_exports_the_stored_vector_and_import_leaves_it_to_the_backfill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: str
) -> None:
    """The configured embedder's vectors (the default e5's: the export used to name MiniLM's
    whatever the embedder, so a default store exported none), exactly as stored."""
    model = OnnxE5() if embedder == "e5" else OnnxMiniLM()
    monkeypatch.setenv("DREAMWELL_EMBEDDER", embedder)
    saver = LongTermStore(tmp_path / "a", embedder=model)
    saver.save("The cat sleeps on the sofa")
    assert saver.backfill() == 1 and saver.checkpoint()  # the server's background work
    out = tmp_path / "v.jsonl"
    assert (
        exit_code("export", "--data-dir", str(tmp_path / "a"), "--with-vectors", "-o", str(out))
        == 0
    )
    line = json.loads(out.read_text())
    assert line["vector_model"] == model.name
    assert line["vector"] == [float(x) for x in model.embed(["The cat sleeps on the sofa"])[0]]
    assert exit_code("import", str(out), "--data-dir", str(tmp_path / "b")) == 0
    assert LongTermStore(tmp_path / "b", embedder=model).missing_vectors() == 1


def test_with_vectors_and_no_embedder_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    LongTermStore(tmp_path).save("The cat sleeps on the sofa")
    monkeypatch.setenv("DREAMWELL_EMBEDDER", "none")
    assert exit_code("export", "--data-dir", str(tmp_path), "--with-vectors") == 1
    err = capsys.readouterr().err
    assert err == "dreamwell: --with-vectors needs an embedder; embedder is none\n"


class Interleaved(list[MemoryEntry]):
    """Records whose second batch is read right after another process wrote."""

    def __init__(self, items: list[MemoryEntry], other_write: Callable[[], object]) -> None:
        super().__init__(items)
        self.other_write = other_write

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice) and index.start:
            self.other_write()
        return super().__getitem__(index)


def test_a_batch_planned_after_another_process_wrote_does_not_undo_its_write(
    tmp_path: Path,
) -> None:
    ours, theirs = store(tmp_path), store(tmp_path)
    kept = ours.save("Standup at nine", category="team").entry
    records, bad = read_records(
        json.dumps(
            [
                {"content": "a"},
                {"content": "b"},
                {"content": "standup at nine", "memory_type": "team"},
            ]
        )
    )
    assert bad == []
    other = Interleaved(records, lambda: theirs.save("Standup at nine", category="team"))
    plan = write_batches(ours, other, utcnow(), batch=2)
    assert (plan.added, plan.reinforced) == (2, 1)
    got = store(tmp_path).get(kept.id)
    assert got is not None and got.reinforcement_count == 3


def test_a_single_pretty_printed_record_and_a_service_record_with_an_id_are_read() -> None:
    own = json.dumps(entry_to_dict(rich_entries()[0]), indent=2)
    records, bad = read_records(own)
    assert bad == [] and records == [rich_entries()[0]]
    service = json.dumps({"id": 7, "content": "Uses vim", "created_at": 1767225600})
    records, bad = read_records(service + "\n")
    assert bad == [] and records[0].content == "Uses vim"
    assert records[0].metadata == {"source": "mcp-memory-service"}


def test_a_text_file_given_by_mistake_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 44: `import README.md` printed 20 error lines, then "pass --skip-bad"."""
    source = tmp_path / "notes.md"
    source.write_text("# Notes\n\n" + "".join(f"- point {i}\n" for i in range(40)))
    data = tmp_path / "d"
    assert exit_code("import", str(source), "--data-dir", str(data)) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"dreamwell: {source} is not JSON Lines: 41 lines are not JSON")
    assert "--skip-bad" not in err and not data.exists()


def test_export_and_import_keep_each_memory_s_project_and_the_same_text_stays_two(
    tmp_path: Path,
) -> None:
    a = store(tmp_path / "a")
    shop = a.save("Run make check first", metadata={PROJECT: "github.com/acme/shop"}).entry
    billing = a.save("run make check first", metadata={PROJECT: "github.com/acme/billing"}).entry
    out = tmp_path / "out.jsonl"
    assert exit_code("export", "--data-dir", str(tmp_path / "a"), "-o", str(out)) == 0
    b = store(tmp_path / "b")
    b.save("Run make check first", metadata={PROJECT: "github.com/acme/shop"})  # already there
    assert exit_code("import", str(out), "--data-dir", str(tmp_path / "b")) == 0
    projects = sorted(e.metadata.get(PROJECT, "") for e in b.entries())
    assert projects == ["github.com/acme/billing", "github.com/acme/shop"]
    assert store(tmp_path / "b").get(billing.id) is not None and shop.id


def test_a_foreign_import_keeps_its_date_but_decays_from_the_import() -> None:
    """An mcp-memory-service export from 2024: the first dream cut every imported importance
    from 0.50 to 0.10 (issue 56 item 5); decay's grace now starts at the import."""
    from dreamwell.dream.rules import DecayPolicy, decay
    from dreamwell.server.cli.formats import from_memory_service

    now = datetime(2026, 12, 6, tzinfo=timezone.utc)
    old = {"content": "prefers tabs", "created_at_iso": "2024-03-01T00:00:00Z"}
    (entry,) = from_memory_service(old, now)
    assert entry.created_at == datetime(2024, 3, 1, tzinfo=timezone.utc)
    assert entry.last_seen_at == now
    a_day_later = decay(entry, now + timedelta(days=1), DecayPolicy())
    assert a_day_later.importance == entry.importance


def _import_within(seconds: float, *args: str) -> int:
    """`dreamwell import ARGS` in this process, on a thread: a read that never ends fails
    the test instead of hanging it."""
    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(exit_code("import", *args)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert codes, f"import still running after {seconds} s"
    return codes[0]


def _hostile(kind: str, at: Path) -> str:
    if kind == "fifo":
        os.mkfifo(at)
    elif kind == "dev-zero":
        at.symlink_to("/dev/zero")
    elif kind == "directory":
        at.mkdir()
    elif kind == "nested-json":
        at.write_text("[" * 100_000 + "]" * 100_000)
    else:  # nested JSON Lines: one good line, one nested too deeply
        good = json.dumps({"content": "Deploys happen on Fridays"})
        at.write_text(good + "\n" + '{"content": ' + "[" * 50_000 + "]" * 50_000 + "}\n")
    return str(at)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "nested-json", "nested-jsonl"])
def test_an_import_of_a_hostile_file_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """qa-turn5 LOW 12: a FIFO waited forever, /dev/zero ended in MemoryError, nested JSON in
    a 33-line RecursionError traceback."""
    source = _hostile(kind, tmp_path / "in.json")
    data = tmp_path / "d"
    assert _import_within(20, source, "--data-dir", str(data)) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and not data.exists()
    if kind in ("fifo", "dev-zero", "directory"):
        refused = "not a regular file (a FIFO, a device or a directory)"
        assert err == f"dreamwell: cannot read {source}: {refused}\n"
    elif kind == "nested-json":
        assert err.startswith(f"dreamwell: {source} is not JSON Lines") and err.count("\n") == 1
    else:
        assert "line 2: not JSON (nested too deeply)" in err and "1 bad record(s)" in err


def test_an_import_larger_than_the_bound_is_refused_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(porting, "MAX_IMPORT_BYTES", 1000)
    source = tmp_path / "big.jsonl"
    source.write_text(json.dumps({"content": "x" * 2000}) + "\n")
    assert exit_code("import", str(source), "--data-dir", str(tmp_path / "d")) == 1
    assert capsys.readouterr().err == (
        f"dreamwell: cannot read {source}: more than 0 MiB; split it (JSON Lines split at any "
        "line)\n"
    )


def test_a_record_of_ours_missing_fields_keeps_its_id_and_category_and_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """qa-turn5 LOW 12: a record with id, content, category and created_at (no updated_at,
    last_seen_at) was read as mcp-memory-service's: its category and id were dropped without
    a word."""
    partial = {
        "id": "0123456789ab",
        "content": "Deploys happen on Fridays",
        "category": "ops/deploy",
        "created_at": "2026-01-02T03:04:05+00:00",
    }
    no_id = {"content": "Staging DB is pg-2", "category": "infra", "tags": ["db"]}
    service = {"content": "Uses vim", "tags": ["editor"], "memory_type": "note"}
    source = tmp_path / "partial.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in (partial, no_id, service)))
    data = tmp_path / "d"
    assert exit_code("import", str(source), "--data-dir", str(data)) == 0
    err = capsys.readouterr().err
    assert f"{source}: line 1: a dreamwell record without last_seen_at, updated_at; kept" in err
    assert f"{source}: line 2: a dreamwell record without created_at, id, last_seen_at" in err
    assert "line 3" not in err  # another server's record is whole as it is
    got = {e.content: e for e in store(data).entries()}
    fridays = got["Deploys happen on Fridays"]
    assert fridays.id == "0123456789ab" and fridays.category == "ops/deploy"
    assert fridays.created_at == fridays.updated_at == fridays.last_seen_at
    assert fridays.created_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert got["Staging DB is pg-2"].category == "infra" and got["Staging DB is pg-2"].tags == (
        "db",
    )
    assert got["Uses vim"].category == "note"
