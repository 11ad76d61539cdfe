"""Fault injection, the way SQLite and LanceDB test themselves: every kind of file in a
populated data directory x every kind of damage. Each case starts a server on the damaged
copy and checks: working memory is served, every memory some copy still holds is found, a
damaged LanceDB file is kept aside, and no tool answers with an opaque error. In-process
(nothing here has crashed the process since LanceDB's files are checked before LanceDB reads
them); `python -m tests.test_damage_sweep` prints the matrix."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import Client

from dreamwell.server.cli.main import main
from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.stores import LongTermStore
from dreamwell.stores.inputs.jsonl_log import CONVERSATION, FEEDBACK, JsonlLog
from tests.support.calls import call, ok

pytestmark = pytest.mark.anyio

BATCH, PENDING = 20, 5
LANCE = Path("lancedb") / "memories.lance"
KINDS = ["deleted", "truncated", "header", "middle", "footer", "zero", "dir"]


def _settings(data: Path) -> Settings:
    return Settings(data_dir=data, embedder="none", namespace="patrol/sweep")


def _newest(paths: list[Path]) -> Path:
    return max(paths, key=lambda p: (p.stat().st_mtime_ns, p.name))


FILES: dict[str, Callable[[Path], Path]] = {
    "wal segment (newest, unfolded)": lambda d: _newest(
        [p for p in (d / "wal").glob("*.log") if p.stat().st_size]
    ),
    "wal segment (oldest)": lambda d: min((d / "wal").glob("*.log")),
    "state file": lambda d: d / "longterm.state",
    "snapshot": lambda d: d / "longterm.snapshot.gz",
    "LanceDB checksums": lambda d: d / "lancedb.sums.json",
    "LanceDB data file": lambda d: min(
        (d / LANCE / "data").glob("*.lance"), key=lambda p: p.stat().st_mtime_ns
    ),
    "LanceDB manifest (newest)": lambda d: min((d / LANCE / "_versions").glob("*.manifest")),
    "LanceDB transaction": lambda d: _newest(list((d / LANCE / "_transactions").glob("*"))),
    "Tantivy meta.json": lambda d: d / "index" / "meta.json",
    "Tantivy segment file": lambda d: sorted((d / "index").glob("*.store"))[0],
    "working-memory file": lambda d: next(
        p for p in (d / "working-memory").rglob("*") if p.is_file() and b"keep me" in p.read_bytes()
    ),
    "dream report": lambda d: next(p for p in (d / "dreams").rglob("*") if p.is_file()),
    "conversation.jsonl": lambda d: d / CONVERSATION,
    "feedback.jsonl": lambda d: d / FEEDBACK,
    "format.json": lambda d: d / "format.json",
}


def damage(path: Path, kind: str) -> None:
    raw = bytearray(path.read_bytes())
    n, cut = len(raw), min(64, max(1, len(raw) // 4))
    if kind == "deleted":
        path.unlink()
    elif kind == "truncated":
        path.write_bytes(raw[: n // 2])
    elif kind == "zero":
        path.write_bytes(b"")
    elif kind == "dir":
        path.unlink()
        path.mkdir()
    else:
        at = {"header": 0, "middle": n // 2, "footer": n - cut}[kind]
        raw[at : at + cut] = b"\xa5" * len(raw[at : at + cut])
        path.write_bytes(bytes(raw))


def populate(data: Path) -> tuple[set[str], set[str]]:
    """Working memory, 3 checkpointed batches and some saves only in the log, logs, a dream
    report. Returns (ids checkpointed, ids only in the newest log segment)."""
    asyncio.run(_working(data))
    store = LongTermStore(data)
    folded: set[str] = set()
    for b in range(3):
        for i in range(BATCH):
            folded.add(store.save(f"fact batch{b} item{i} tok{b}x{i}", category="t").entry.id)
        assert store.checkpoint()
    with pytest.raises(SystemExit):  # a dream report (the dream checkpoints, takes the logs)
        main(["dream", "--once", "--data-dir", str(data)])
    JsonlLog(data, CONVERSATION).append({"session": "s", "role": "user", "content": "hello"})
    JsonlLog(data, FEEDBACK).append({"session": "s", "kind": "useful", "detail": "yes"})
    store = LongTermStore(data)
    logged = {store.save(f"unfolded {i} toklog{i}", category="t").entry.id for i in range(PENDING)}
    return folded, logged


async def _working(data: Path) -> None:
    async with Client(build_server(_settings(data))) as client:
        await ok(client, "save_to_working_memory", key="plan", data="keep me", ttl_minutes=600)


@dataclass
class Outcome:
    working: bool  # working memory served
    found: int  # memories found of those some copy held
    expected: int
    lost: int  # memories no copy held (the case damaged their only copy)
    kept_aside: bool  # the damaged file is kept (under damaged/ or as *.corrupt-*)
    opaque: list[str]  # tool replies that said nothing useful


async def run_case(
    base: Path, ids: tuple[set[str], set[str]], tmp: Path, what: str, kind: str
) -> Outcome:
    data = tmp / "data"
    shutil.copytree(base, data)
    target = FILES[what](data)
    damage(target, kind)
    opaque: list[str] = []
    async with Client(build_server(_settings(data))) as client:
        error, wm = await call(client, "get_from_working_memory", key="plan")
        working = not error and "keep me" in wm
        for tool, args in (
            ("search_memory", {"query": "tok0x3"}),
            ("search_memory", {"query": "toklog1"}),
            ("save_memory", {"content": "after the damage tokafter", "category": "t"}),
            ("list_working_memory", {}),
            ("save_to_working_memory", {"key": "after", "data": "x", "ttl_minutes": 5}),
        ):
            error, text = await call(client, tool, **args)
            if error and ("Error executing tool" in text or "Traceback" in text):
                opaque.append(f"{tool}: {text[:120]}")
        if not working and not opaque:
            opaque += [] if "working-memory" in what else [f"working memory: {wm[:120]}"]
    held = ids[0] | ids[1]
    present = {e.id for e in LongTermStore(data).entries(include_archived=True)}
    lost = held - present
    kept = any((data / "damaged").glob("*")) or any(data.rglob(f"{target.name}.corrupt-*"))
    return Outcome(working, len(held & present), len(held), len(lost), kept, opaque)


@pytest.fixture(scope="module")
def populated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[set[str], set[str]]]:
    data = tmp_path_factory.mktemp("sweep") / "data"
    return data, populate(data)


# what no copy holds: the saves not yet checkpointed live only in the newest log segment
LOSES_UNFOLDED = {"wal segment (newest, unfolded)"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("what", list(FILES))
async def test_damage(
    populated: tuple[Path, tuple[set[str], set[str]]], tmp_path: Path, what: str, kind: str
) -> None:
    base, ids = populated
    out = await run_case(base, ids, tmp_path, what, kind)
    assert out.opaque == []
    if what != "working-memory file":
        assert out.working
    allowed = PENDING if what in LOSES_UNFOLDED else 0
    assert out.expected - out.found <= allowed, out
    if what.startswith(("LanceDB data", "LanceDB manifest", "working-memory")):
        assert out.kept_aside or kind == "deleted"


if __name__ == "__main__":  # the matrix: python -m tests.test_damage_sweep
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base" / "data"
        ids = populate(base)
        for what in FILES:
            for kind in KINDS:
                case = Path(tmp) / f"{what}-{kind}".replace(" ", "_").replace("/", "_")
                case.mkdir()
                out = asyncio.run(run_case(base, ids, case, what, kind))
                sys.stdout.write(f"{what}\t{kind}\t{out}\n")
                sys.stdout.flush()
