"""Goal 8 of issue 53: every secret shape (tests/support/secrets.py) is redacted in every field
that is stored — a memory's content, category and tags, a working-memory entry's value,
category and tags (its key refused), every import format, and every log record — and
nothing of it reaches a file of the data directory."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dreamwell.server.cli.formats import read_records
from dreamwell.stores import (
    CONVERSATION,
    InvalidInput,
    JsonlLog,
    LongTermStore,
    WorkingMemory,
    redact,
)
from dreamwell.stores.redact import MARK
from tests.support.cli import exit_code
from tests.support.secrets import SHAPES, Shape, leaked

CATEGORY_SAFE = re.compile(r"[A-Za-z0-9_-]+")  # a secret a category path could hold


WHOLE = [s for s in SHAPES if s.whole]  # shapes that are a secret and nothing else


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> LongTermStore:
    return LongTermStore(tmp_path_factory.mktemp("longterm"), embedder=None)


def category_for(shape: Shape) -> str:
    return f"ops/{shape.text}"


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_the_shape_is_redacted_and_its_surroundings_kept(shape: Shape) -> None:
    out = redact(f"before {shape.text} after")
    assert shape.secret not in out and MARK in out
    assert out.startswith("before ") and out.endswith(" after")
    assert redact(out) == out  # redacting twice (the tool, then the store) changes nothing


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_a_memory_keeps_the_shape_in_no_field(shape: Shape, store: LongTermStore) -> None:
    saved = store.save(f"note {shape.name}: {shape.text}", "ops", tags(shape)).entry
    assert saved.content.startswith(f"note {shape.name}: ") and MARK in saved.content
    assert "kept" in saved.tags and shape.secret.lower() not in " ".join(saved.tags)
    if shape.whole:  # the token becomes the segment 'redacted'
        filed = store.save(f"{shape.name} filed", category_for(shape)).entry
        assert filed.category == "ops/redacted"
    else:  # what is left holds punctuation no category allows: refused, nothing written
        with pytest.raises(InvalidInput, match="is not valid"):
            store.save(f"{shape.name} filed", category_for(shape))
    assert leaked(store.data_dir, [shape.secret]) == []


def tags(shape: Shape) -> list[str]:
    if shape.as_tag is None:
        return ["kept"]
    return [f"about {shape.as_tag}", shape.as_tag, "kept"]


@pytest.mark.parametrize("shape", WHOLE, ids=str)
def test_content_that_is_nothing_but_the_shape_is_refused(
    shape: Shape, store: LongTermStore
) -> None:
    with pytest.raises(InvalidInput, match="content is empty once its <private> spans and"):
        store.save(f" {shape.text} <private>x</private>, {shape.text}", "ops")


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_working_memory_keeps_the_shape_in_no_field(shape: Shape, tmp_path: Path) -> None:
    wm = WorkingMemory(tmp_path)
    category = category_for(shape) if shape.whole else "ops"
    entry = wm.save("session/a", "draft", f"v {shape.text}", 5, category, tags(shape)).entry
    assert MARK in entry.value and "kept" in entry.tags
    assert entry.category == ("ops/redacted" if category != "ops" else "ops")
    if shape.whole and CATEGORY_SAFE.fullmatch(shape.text):  # a key could be the token
        with pytest.raises(InvalidInput, match="key holds a secret"):
            wm.save("session/a", shape.text, "v")
        with pytest.raises(InvalidInput, match="data is empty once"):
            wm.save("session/a", "only", shape.text)
    assert leaked(tmp_path, [shape.secret]) == []


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_import_format_keeps_the_shape_in_no_field(shape: Shape) -> None:
    own = {
        "id": "0123456789ab",
        "content": f"own {shape.text}",
        "category": "ops",
        "tags": tags(shape),
        "created_at": "2026-01-01T00:00:00+00:00",
        "updated_at": "2026-01-01T00:00:00+00:00",
        "last_seen_at": "2026-01-01T00:00:00+00:00",
        "metadata": {"source": shape.text},
    }
    service = {"content": f"svc {shape.text}", "tags": tags(shape), "memory_type": "note"}
    graph = {
        "type": "entity",
        "name": "alice",
        "entityType": "person",
        "observations": [shape.text],
    }
    lines = "\n".join(json.dumps(r) for r in (own, service, graph))
    records, bad = read_records(lines)
    assert bad == [] and len(records) == 3
    for r in records:
        stored = json.dumps([r.content, r.category, r.tags, dict(r.metadata)])
        assert shape.secret not in stored and MARK in r.content, stored


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_a_log_record_keeps_the_shape_in_no_field(shape: Shape, tmp_path: Path) -> None:
    JsonlLog(tmp_path, "skill-usage.jsonl").append(
        {"session": "s", "skill": shape.text, "nested": {"list": [shape.text]}}
    )
    [record] = JsonlLog(tmp_path, "skill-usage.jsonl").read()
    assert MARK in record["skill"] and MARK in record["nested"]["list"][0]
    assert leaked(tmp_path, [shape.secret]) == []


def test_dreamwell_log_and_import_write_no_shape(tmp_path: Path) -> None:
    """The two commands a user runs by hand, in this process, every shape at once."""
    data = tmp_path / "data"
    for shape in SHAPES:
        assert exit_code("log", "--data-dir", str(data), "conversation", shape.text) == 0
    said = [r["content"] for r in JsonlLog(data, CONVERSATION).read()]
    assert len(said) == len(SHAPES) and all(MARK in s for s in said)
    source = tmp_path / "in.jsonl"
    lines = [{"content": f"{s.name} {s.text}", "tags": tags(s), "memory_type": "n"} for s in SHAPES]
    source.write_text("\n".join(json.dumps(line) for line in lines))
    assert exit_code("import", "--data-dir", str(data), str(source)) == 0
    assert leaked(data, [s.secret for s in SHAPES]) == []
