"""A mixed load on one data directory: two `dreamwell serve` stdio processes taking saves,
deletes (of each other's entries too), reinforcements, searches, category listings and
working-memory calls, pipelined, while a third process dreams over and over; then an exact
account of what must be stored. Used by tests/test_multiprocess.py and
tests/bench/mixed_load_bench.py.

The model is kept exactly: every reply is checked against what the acknowledged operations
imply, and an entry is never the target of two concurrent operations (ids, seeds and
working-memory keys in use are reserved), so no check has to be lenient, and the servers
must log no error at all. The dream's own writes are accounted for from its reports (the
before/after image of each change)."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TextIO

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from dreamwell.dream.report import Report, list_reports, load_report
from dreamwell.stores import LongTermStore, MemoryEntry, utcnow
from tests.support.calls import call

CATEGORIES = ("mp/alpha", "mp/beta", "ops", None)
WM_KEYS = 10  # working-memory keys per server process (below the namespace limit of 50)
_SAVED = re.compile(r"Saved memory \[([0-9a-f]{12})\] \(")
_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ", re.M)


def server_params(data: Path, embedder: str = "none") -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "dreamwell.server", "serve", "--data-dir", str(data)],
        env={**os.environ, "DREAMWELL_EMBEDDER": embedder, "DREAMWELL_LOG_LEVEL": "ERROR"},
    )


def token(rng: random.Random) -> str:
    return f"tok{rng.getrandbits(48):012x}"


@dataclass
class Seeds:
    """Entries written before the servers start, each a target of one dream pass."""

    aged: dict[str, str] = field(default_factory=dict)  # id -> content; decayed every cycle
    pairs: dict[str, tuple[str, str]] = field(default_factory=dict)  # content -> two copies
    harmful: dict[str, str] = field(default_factory=dict)  # id -> content; pruned at once


def seed(data: Path, rng: random.Random, aged: int, pairs: int, harmful: int) -> Seeds:
    now = utcnow()
    old, recent = now - timedelta(days=100), now - timedelta(days=1)
    seeds, entries = Seeds(), list[MemoryEntry]()

    def add(content: str, when: datetime, score: float = 0.0) -> str:
        entry_id = f"{len(entries):012x}"
        entries.append(MemoryEntry(entry_id, content, "seed", (), when, when, when, score=score))
        return entry_id

    for _ in range(aged):
        content = f"aged fact {token(rng)}"
        seeds.aged[add(content, old)] = content
    for _ in range(pairs):
        content = f"twice told fact {token(rng)}"
        seeds.pairs[content] = (add(content, recent), add(content, recent))
    for _ in range(harmful):
        content = f"harmful fact {token(rng)}"
        seeds.harmful[add(content, recent, score=-2.5)] = content
    store = LongTermStore(data)
    store.apply(entries)
    store.checkpoint()
    return seeds


@dataclass
class Load:
    """The shared model: what was acknowledged, and what is in flight."""

    rng: random.Random
    seeds: Seeds
    total: int
    restart_at: int | None = None  # op number at which server 1 is restarted
    logs: Path | None = None  # each server process's stderr goes to a file here
    dream_every: int = 400  # operations between the starts of two dream cycles (at most)
    wake: anyio.Event | None = None  # set every `dream_every` operations
    # BM25 only (embedder none): a token search finds exactly its entry. With vectors,
    # cosine adds neighbours: the entry must be among the hits, a deleted one never.
    exact_search: bool = True
    issued: int = 0
    live: dict[str, tuple[str, int]] = field(default_factory=dict)  # id -> (token, saver)
    deleted: dict[str, str] = field(default_factory=dict)  # user id -> token
    seeds_deleted: set[str] = field(default_factory=set)
    reinforced: Counter[str] = field(default_factory=Counter)
    busy: set[str] = field(default_factory=set)  # ids and keys an operation is using
    wm: dict[int, dict[str, str]] = field(default_factory=lambda: {0: {}, 1: {}})
    counts: Counter[str] = field(default_factory=Counter)
    cycles: int = 0
    started: float = 0.0  # traffic began (time.time())
    finished: float = 0.0  # the last operation was answered

    @property
    def done(self) -> bool:
        return self.issued >= self.total

    def take(self, slot: int) -> bool:
        """Claim the next operation for a worker of server `slot` (False: stop)."""
        if self.done or (
            slot == 1 and self.restart_at is not None and self.issued >= self.restart_at
        ):
            return False
        self.issued += 1
        if self.wake is not None and (self.issued % self.dream_every == 0 or self.done):
            self.wake.set()
        return True

    def pick(self, pool: Iterable[str]) -> str | None:
        """Reserve a random member of `pool` that no operation is using."""
        free = [i for i in pool if i not in self.busy]
        if not free:
            return None
        chosen = self.rng.choice(free)
        self.busy.add(chosen)
        return chosen


Op = Callable[[Client, int, Load], Awaitable[str]]


async def op_save(client: Client, slot: int, load: Load) -> str:
    tok = token(load.rng)
    text = await _ok(
        client,
        "save_memory",
        content=f"fact {tok} from server {slot}",
        category=load.rng.choice(CATEGORIES),
    )
    match = _SAVED.match(text)
    assert match, text
    load.live[match.group(1)] = (tok, slot)
    return "save"


async def op_delete(client: Client, slot: int, load: Load) -> str:
    entry_id = load.pick(load.live)
    if entry_id is None:
        return await op_save(client, slot, load)
    try:
        text = await _ok(client, "delete_memory", id=entry_id)
        assert text.startswith(f"Deleted memory entry '{entry_id}'"), text
        tok, saver = load.live.pop(entry_id)
        load.deleted[entry_id] = tok
    finally:
        load.busy.discard(entry_id)
    return "delete (other server)" if saver != slot else "delete (same server)"


async def op_delete_seed(client: Client, slot: int, load: Load) -> str:
    pool = [*load.seeds.aged, *load.seeds.harmful]
    entry_id = load.pick(i for i in pool if i not in load.seeds_deleted)
    if entry_id is None:
        return await op_save(client, slot, load)
    try:
        text = await _ok(client, "delete_memory", id=entry_id)
        assert text.startswith(f"Deleted memory entry '{entry_id}'"), text
        load.seeds_deleted.add(entry_id)
    finally:
        load.busy.discard(entry_id)
    return "delete seed"


async def op_reinforce(client: Client, slot: int, load: Load) -> str:
    entry_id = load.pick(i for i in load.seeds.aged if i not in load.seeds_deleted)
    if entry_id is None:
        return await op_save(client, slot, load)
    try:
        text = await _ok(client, "save_memory", content=load.seeds.aged[entry_id], category="seed")
        seen = load.reinforced[entry_id] + 2
        assert text == f"Reinforced memory [{entry_id}] (seen {seen}×).", text
        load.reinforced[entry_id] += 1
    finally:
        load.busy.discard(entry_id)
    return "reinforce seed"


async def op_search(client: Client, slot: int, load: Load) -> str:
    entry_id = load.pick(load.live)
    if entry_id is None:
        return await op_save(client, slot, load)
    try:
        text = await _ok(client, "search_memory", query=load.live[entry_id][0])
        _assert_found(load, text, entry_id)
    finally:
        load.busy.discard(entry_id)
    return "search"


async def op_search_seed(client: Client, slot: int, load: Load) -> str:
    entry_id = load.pick(i for i in load.seeds.aged if i not in load.seeds_deleted)
    if entry_id is None:
        return await op_save(client, slot, load)
    try:
        tok = load.seeds.aged[entry_id].split()[-1]
        text = await _ok(client, "search_memory", query=tok)
        _assert_found(load, text, entry_id)
    finally:
        load.busy.discard(entry_id)
    return "search seed"


async def op_search_deleted(client: Client, slot: int, load: Load) -> str:
    if not load.deleted:
        return await op_save(client, slot, load)
    entry_id = load.rng.choice(list(load.deleted))
    text = await _ok(client, "search_memory", query=load.deleted[entry_id])
    said = f"deleted {entry_id}, searched on server {slot}: {text}"
    if load.exact_search:  # nor through a neighbour's contextual field
        assert text == "No memories found matching the search criteria.", said
    assert f"[{entry_id}]" not in text, said
    return "search deleted"


def _assert_found(load: Load, text: str, entry_id: str) -> None:
    if load.exact_search:  # first; its contextual neighbours may follow
        first = re.search(r"\[([0-9a-f]{12})\]", text)
        assert first is not None and first.group(1) == entry_id, text
    assert f"[{entry_id}]" in text, text


async def op_categories(client: Client, slot: int, load: Load) -> str:
    text = await _ok(client, "list_memory_categories")
    assert text.startswith("Memory categories:\n") and "- seed (" in text, text
    return "list categories"


async def op_wm_save(client: Client, slot: int, load: Load) -> str:
    key = load.pick(f"{slot}:k{i}" for i in range(WM_KEYS))
    if key is None:
        return await op_categories(client, slot, load)
    try:
        value = token(load.rng)
        load.wm[slot].pop(key, None)  # unknown until acknowledged
        text = await _ok(client, "save_to_working_memory", key=key[2:], data=value)
        assert text.startswith("Saved to working memory under key 'session/"), text
        assert f"/{key[2:]}' (expires in " in text, text
        load.wm[slot][key] = value
    finally:
        load.busy.discard(key)
    return "working save"


async def op_wm_get(client: Client, slot: int, load: Load) -> str:
    key = load.pick(load.wm[slot])
    if key is None:
        return await op_wm_save(client, slot, load)
    try:
        assert await _ok(client, "get_from_working_memory", key=key[2:]) == load.wm[slot][key]
    finally:
        load.busy.discard(key)
    return "working get"


async def op_wm_list(client: Client, slot: int, load: Load) -> str:
    text = await _ok(client, "list_working_memory")
    assert text.startswith(("Working memory 'session/", "Working memory is empty.")), text
    return "working list"


async def op_wm_search(client: Client, slot: int, load: Load) -> str:
    text = await _ok(client, "search_working_memory", query="tok")
    assert text.startswith("Working memory search (query='tok') in 'session/"), text
    return "working search"


MIX: list[tuple[Op, float]] = [
    (op_save, 35),
    (op_delete, 10),
    (op_delete_seed, 3),
    (op_reinforce, 5),
    (op_search, 18),
    (op_search_seed, 5),
    (op_search_deleted, 5),
    (op_categories, 4),
    (op_wm_save, 6),
    (op_wm_get, 6),
    (op_wm_list, 1.5),
    (op_wm_search, 1.5),
]


async def _ok(client: Client, tool: str, **args: object) -> str:
    error, text = await call(client, tool, **{k: v for k, v in args.items() if v is not None})
    assert not error, f"{tool}({args}) failed: {text}"
    return text


async def _worker(client: Client, slot: int, load: Load) -> None:
    ops, weights = zip(*MIX, strict=True)
    while load.take(slot):
        op = load.rng.choices(ops, weights)[0]
        load.counts[await op(client, slot, load)] += 1


async def run_server(params: StdioServerParameters, slot: int, load: Load, depth: int) -> None:
    """One server process with `depth` operations in flight; server 1 is stopped (EOF) and
    started again once `load.restart_at` operations were issued."""
    while True:
        with _errlog(load, f"server{slot}") as errlog:
            async with (
                Client(stdio_client(params, errlog)) as client,
                anyio.create_task_group() as tg,
            ):
                for _ in range(depth):
                    tg.start_soon(_worker, client, slot, load)
        if load.done:
            return
        load.restart_at = None
        load.wm[slot] = {}  # a new process: a new working-memory namespace
        load.counts["server restart"] += 1


async def run_dreamer(params: StdioServerParameters, load: Load) -> None:
    """The sidecar: a third process that dreams (apply=yes: no waiting for quiet) until the
    traffic is over."""
    with _errlog(load, "dreamer") as errlog:
        await _dream_until_done(Client(stdio_client(params, errlog)), load)


async def _dream_until_done(dreamer: Client, load: Load) -> None:
    async with dreamer as client:
        while not load.done or load.cycles == 0:
            if load.cycles:  # paced by the traffic, so the dream does not take all the CPU
                load.wake = anyio.Event()
                await load.wake.wait()
            result = await client.get_prompt("dream", {"apply": "yes"})
            text = result.messages[0].content.text  # type: ignore[union-attr]
            assert text.startswith("Dream report "), text
            load.cycles += 1


async def run_load(data: Path, load: Load, depth: int = 8, embedder: str = "none") -> None:
    params = server_params(data, embedder)
    load.logs = load.logs or data.parent / "server-logs"
    async with anyio.create_task_group() as tg:
        load.started = time.time()
        tg.start_soon(run_dreamer, params, load)
        async with anyio.create_task_group() as servers:
            for slot in (0, 1):
                servers.start_soon(run_server, params, slot, load, depth)
        load.finished = time.time()


# ---- the account -------------------------------------------------------------------------------
def _errlog(load: Load, name: str) -> TextIO:
    assert load.logs is not None
    load.logs.mkdir(parents=True, exist_ok=True)
    return open(load.logs / f"{name}-{load.issued}.log", "w")


def check_logs(load: Load) -> None:
    """The servers logged no error. (Before the write-ahead log's reader took one lock, a
    thread of a server could race another over the log's file descriptor: EBADF or a
    TypeError, see tests/stores/longterm/test_store_threads.py.)"""
    assert load.logs is not None
    errors = []
    for path in sorted(load.logs.iterdir()):
        text = path.read_text()
        errors += [f"{path.name}: {record[:2000]}" for record in _RECORD.split(text)[1:]]
        if _RECORD.split(text)[0].strip():
            errors.append(f"{path.name}: {_RECORD.split(text)[0][:2000]}")
    assert errors == [], "\n".join(errors)


def reports(data: Path) -> list[Report]:
    """Every dream cycle's report, oldest first."""
    return sorted((load_report(data, run) for run in list_reports(data)), key=lambda r: r.started)


@dataclass
class Account:
    entries: dict[str, MemoryEntry]  # every stored entry, archived ones too
    store: LongTermStore
    facts: Counter[str] = field(default_factory=Counter)

    def found(self, tok: str) -> list[str]:
        """The ids of the hits holding `tok` that a keyword search returns (the index only:
        nothing is pending); contextual neighbours, found through their field, are left out."""
        return [h.entry.id for h in self.store.search(tok) if tok in h.entry.content]


def check(data: Path, load: Load) -> Counter[str]:
    """After every process stopped: a checkpoint, then the store reopened from LanceDB and
    the Tantivy index alone must hold exactly what the acknowledged operations and the
    dream's reports imply. Returns what was counted."""
    check_logs(load)
    LongTermStore(data).checkpoint()
    store = LongTermStore(data)
    assert store.pending() == 0
    everything = store.entries(include_archived=True)
    account = Account({e.id: e for e in everything}, store)
    # merged sources keep their text (archived); anything else stored twice is a duplicate
    live = Counter(e.content for e in everything if e.live)
    assert [c for c, n in live.items() if n > 1] == [], "live content stored twice"
    user = Counter(e.content for e in everything if e.content.startswith("fact tok"))
    assert [c for c, n in user.items() if n > 1] == [], "a save stored twice"
    runs = reports(data)
    _check_user_saves(account, load)
    merged = _check_pairs(account, load, runs)
    _check_aged(account, load, runs)
    _check_harmful(account, load, runs)
    known = set(load.live) | set(load.seeds.aged) | set(load.seeds.harmful) | merged
    known |= {i for pair in load.seeds.pairs.values() for i in pair}
    assert set(account.entries) - known == set(), "entries nobody saved"
    live = [e for e in everything if e.live]
    assert store.index_documents() == len(live) and store.index_in_step()
    assert store.index_ids() == {e.id for e in live}, "the index and the table disagree"
    account.facts["live entries"] = len(live)
    account.facts["index documents"] = store.index_documents()
    _check_dream_raced(account, load, runs)
    doctor = subprocess.run(
        [sys.executable, "-m", "dreamwell.server", "doctor", "--data-dir", str(data)],
        env={**os.environ, "DREAMWELL_EMBEDDER": "none"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "ok   [default] text index agrees with the table" in doctor.stdout, doctor.stdout
    return account.facts


def _check_user_saves(account: Account, load: Load) -> None:
    for entry_id, (tok, slot) in load.live.items():
        entry = account.entries.get(entry_id)
        assert entry is not None and entry.live, f"acknowledged save {entry_id} lost"
        assert entry.content == f"fact {tok} from server {slot}"
        assert account.found(tok) == [entry_id], f"{tok}: index and table disagree"
    for entry_id, tok in load.deleted.items():
        assert entry_id not in account.entries, f"deleted {entry_id} came back"
        assert account.store.search(tok) == [], f"deleted {entry_id} still in the index"
    stored_user = {i for i, e in account.entries.items() if e.content.startswith("fact tok")}
    assert stored_user == set(load.live), "a save stored that was never acknowledged, or lost"
    account.facts["acknowledged saves kept"] = len(load.live)
    account.facts["acknowledged deletes"] = len(load.deleted)


def _check_pairs(account: Account, load: Load, runs: list[Report]) -> set[str]:
    """Each exact-duplicate pair became one merged entry that keeps its provenance."""
    merges = [c for r in runs for c in r.changes() if c.kind == "merge"]
    by_content = {c.after.content: c.after for c in merges if c.after is not None}
    assert len(merges) == len(by_content) == len(load.seeds.pairs)
    for content, (first, second) in load.seeds.pairs.items():
        merged = by_content[content]
        assert account.entries[merged.id] == merged
        assert merged.metadata["merged_from"] == f"{first},{second}"
        assert merged.reinforcement_count == 2
        assert not account.entries[first].live and not account.entries[second].live
        assert account.found(content.split()[-1]) == [merged.id]
    account.facts["merged pairs"] = len(by_content)
    return {m.id for m in by_content.values()}


def _check_aged(account: Account, load: Load, runs: list[Report]) -> None:
    """Each aged seed is as the last decay the reports show left it, plus the acknowledged
    reinforcements; a deleted one stays deleted."""
    last = {c.after.id: c.after for r in runs for c in r.changes() if c.kind == "decay" and c.after}
    for entry_id, content in load.seeds.aged.items():
        entry = account.entries.get(entry_id)
        if entry_id in load.seeds_deleted:
            assert entry is None, f"deleted seed {entry_id} came back"
            assert account.store.search(content.split()[-1]) == []
            continue
        assert entry is not None and entry.live, f"aged seed {entry_id} lost"
        assert entry.reinforcement_count == 1 + load.reinforced[entry_id], entry
        decayed = last.get(entry_id)
        assert entry.importance == (decayed.importance if decayed else 0.5), (entry, decayed)
        assert entry.decayed_at == (decayed.decayed_at if decayed else None), (entry, decayed)
        assert account.found(content.split()[-1]) == [entry_id]
    account.facts["decay writes"] = sum(1 for r in runs for c in r.changes() if c.kind == "decay")
    account.facts["reinforcements"] = sum(load.reinforced.values())


def _check_harmful(account: Account, load: Load, runs: list[Report]) -> None:
    pruned = {c.before.id for r in runs for c in r.changes() if c.kind == "prune" and c.before}
    for entry_id, content in load.seeds.harmful.items():
        entry = account.entries.get(entry_id)
        if entry_id in load.seeds_deleted:
            assert entry is None, f"deleted seed {entry_id} came back"
        else:
            assert entry is not None and not entry.live and entry_id in pruned
        assert account.store.search(content.split()[-1]) == []
    account.facts["pruned"] = len(pruned)


def _check_dream_raced(account: Account, load: Load, runs: list[Report]) -> None:
    """The dream wrote while the servers did: cycles that both began and ended inside the
    traffic, with writes of their own (else this proves nothing about the race)."""
    inside = [
        r for r in runs if load.started <= _epoch(r.started) and _epoch(r.finished) <= load.finished
    ]
    assert inside and sum(len(r.changes()) for r in inside) > 0, "the dream never raced"
    account.facts["dream cycles"] = len(runs)
    account.facts["dream cycles inside the traffic"] = len(inside)
    account.facts["dream writes inside the traffic"] = sum(len(r.changes()) for r in inside)
    account.facts["dream conflicts (compare-and-set refused)"] = sum(
        1 for r in runs for p in r.passes for n in p.notes if n.startswith("conflict:")
    )


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()
