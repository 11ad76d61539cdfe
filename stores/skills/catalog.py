"""The skills store (docs/skills.md): one JSON record per skill, per tenant.

Reading (never blocks, never locks; a snapshot reloaded when `skills/.generation` moved):
    catalog = SkillCatalog(data_dir, embedder=None, min_similarity=0.0)
    catalog.list("active" | ("active", "candidate") | None) -> [Skill] by name
    catalog.get(name) -> Skill (NotFound) / catalog.find(name) -> Skill | None
    catalog.search(query, limit=5, status="active") -> [(Skill, score)]  hybrid BM25 + cosine
    catalog.generation() -> int                                           bumped by every write
Writing (file lock, per-skill compare-and-set on `revision`, fsynced before returning):
    catalog.put(folder, expect=NEW | revision, origin=, status=) -> Skill  (SkillConflict)
    catalog.archive / restore / approve (candidate -> active) / pin(name, pinned, expect=)
    catalog.apply([SkillChange(name, expect, files=, status=, pinned=, origin=, see_also=,
                   created_at=, remove=)], refuse_pinned=False) -> ApplyResult(written, conflicts)
Content comes in as files (path -> bytes) and is validated by skillio.make_folder (SKILL.md
per docs/skills.md, its name equal to the change's name): bad content raises InvalidSkill before
anything is written. Usage is not here: stores/skills/usage.py (SkillUsage.record_use / stats).

Where the records live is the storage's (stores/skills/storage.py): files under `skills.lock`
in a local data directory, objects committed through one manifest on object storage
(stores/skills/object_storage.py). Either way each write checks each skill's `revision` against the
one the writer read: a moved revision leaves that skill out and reports it, the others are
written (with `whole`, none is).
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from dreamwell.stores.errors import InvalidInput, NotFound, StoreError
from dreamwell.stores.layout import DataDir
from dreamwell.stores.model import new_id, utcnow
from dreamwell.stores.skills.folders import make_folder
from dreamwell.stores.skills.record import Skill as Skill
from dreamwell.stores.skills.skill_md import SkillFolder, check_name
from dreamwell.stores.skills.storage import Current, FileSkills, RevisionFor, SkillStorage

if TYPE_CHECKING:
    from dreamwell.stores.index.embedders import Embedder
    from dreamwell.stores.skills.search import SkillIndex, VectorCache

logger = logging.getLogger(__name__)
Puts = dict[str, Skill | None]

STATUSES = ("active", "candidate", "archived")
ORIGINS = ("user", "dream", "import")
NEW: int | None = None  # `expect` of a skill that must not exist yet
ANY_REVISION = -1  # `expect` that skips the compare-and-set (user commands)


class SkillConflict(StoreError):
    """A compare-and-set write found another revision (or a pinned skill): nothing written."""

    def __init__(self, conflicts: Sequence[Conflict]) -> None:
        super().__init__("; ".join(c.reason for c in conflicts))
        self.conflicts = tuple(conflicts)


def open_storage(layout: DataDir, lock_timeout: float) -> SkillStorage:
    remote = layout.remote
    if remote is None:
        return FileSkills(layout, lock_timeout)
    from dreamwell.stores.skills.object_storage import BlobSkills

    return BlobSkills(remote, layout.skills)


@dataclass(frozen=True)
class SkillChange:
    """One skill's change in `apply`. `expect`: the revision the writer read (NEW: the skill
    must not exist yet; ANY_REVISION: no check). `files` replaces every file (validated, the
    SKILL.md's name must be `name`); None fields stay as they are. `created_at` (ISO time)
    lets a merge keep the earliest creation. `remove` deletes the record: only for undoing
    the creation of a skill (a skill is otherwise archived, never deleted). `executable`: the
    paths of `files` that are executable; None keeps the bit of each file that stays."""

    name: str
    expect: int | None
    files: Mapping[str, bytes] | None = None
    status: str | None = None
    pinned: bool | None = None
    origin: str | None = None
    see_also: tuple[str, ...] | None = None
    created_at: str | None = None
    project: str | None = None  # set the project it belongs to ('' makes it global)
    remove: bool = False
    executable: frozenset[str] | None = None


@dataclass(frozen=True)
class Conflict:
    name: str
    expected: int | None
    found: int | None  # the revision on disk, None when the skill does not exist
    reason: str


@dataclass(frozen=True)
class ApplyResult:
    written: tuple[Skill, ...]  # as written (a removed skill: as it was before)
    conflicts: tuple[Conflict, ...]


def _check_choice(value: str | None, allowed: tuple[str, ...], what: str) -> None:
    if value is not None and value not in allowed:
        raise InvalidInput(f"{what} must be one of {', '.join(allowed)}; got {value!r}")


@dataclass(frozen=True)
class _Snapshot:
    generation: int
    skills: Mapping[str, Skill]


class SkillCatalog:
    """The skills of one data directory (a tenant's, or the root's)."""

    def __init__(
        self,
        data_dir: Path | DataDir,
        embedder: Embedder | None = None,
        lock_timeout: float = 15.0,
        min_similarity: float = 0.0,
    ) -> None:
        self.layout = data_dir if isinstance(data_dir, DataDir) else DataDir(data_dir)
        self._storage = open_storage(self.layout, lock_timeout)
        self._snapshot = _Snapshot(-1, {})
        self._index: tuple[int, SkillIndex] | None = None
        self._embedder = embedder
        self._vectors: VectorCache | None = None  # made on first search (loads Tantivy, numpy)
        self._min_similarity = min_similarity
        self._reading = threading.Lock()

    # ---- reading ---------------------------------------------------------------------------
    def generation(self) -> int:
        """The catalog's generation (0 before the first write); one small read."""
        return self._storage.generation()

    def version(self) -> object:
        """A cheap token that moves when the generation may have (a stat, or a HEAD on object
        storage): what the servers' watch polls."""
        return self._storage.version()

    @property
    def blocking(self) -> bool:
        """Whether `version()` and `generation()` wait on the network (object storage)."""
        return self._storage.blocking

    def _current(self) -> _Snapshot:
        generation = self.generation()
        snap = self._snapshot
        if snap.generation == generation:
            return snap
        with self._reading:
            if self._snapshot.generation != generation:
                self._snapshot = _Snapshot(*self._storage.read_all())
            return self._snapshot

    def list(self, status: str | Iterable[str] | None = None) -> list[Skill]:
        """Skills by name; `status`: one status or several, None for all."""
        wanted = {status} if isinstance(status, str) else None if status is None else set(status)
        skills = self._current().skills.values()
        return sorted((s for s in skills if wanted is None or s.status in wanted), key=_by_name)

    def find(self, name: str) -> Skill | None:
        return self._current().skills.get(name)

    def get(self, name: str) -> Skill:
        found = self.find(name)
        if found is None:
            raise NotFound(f"no skill named {name!r}; `dreamwell skills list` shows them")
        return found

    def search(
        self, query: str, limit: int = 5, status: str | Iterable[str] = "active"
    ) -> builtins.list[tuple[Skill, float]]:
        """Hybrid search over name, description and body: (skill, score) best first."""
        from dreamwell.stores.skills.search import SkillIndex, VectorCache

        if self._vectors is None:
            self._vectors = VectorCache(self._embedder)
        snap = self._current()
        index = self._index
        if index is None or index[0] != snap.generation:
            built = SkillIndex(snap.skills.values(), self._vectors, self._min_similarity)
            self._index = index = (snap.generation, built)
        wanted = {status} if isinstance(status, str) else set(status)
        hits = index[1].search(query, limit * 4 + 10)
        found = [(snap.skills[n], s) for n, s in hits if n in snap.skills]
        return [(k, s) for k, s in found if k.status in wanted][:limit]

    # ---- writing ---------------------------------------------------------------------------
    def apply(
        self, changes: Sequence[SkillChange], *, refuse_pinned: bool = False, whole: bool = False
    ) -> ApplyResult:
        """Write several skills at once, each compare-and-set: a change whose skill moved (or,
        with `refuse_pinned`, is pinned) is left out and reported as a conflict; the others
        are written (with `whole`, none is: the changes stand or fall together). Bad content
        (InvalidInput) refuses the whole call, nothing written."""
        folders = {c.name: self._validated(c) for c in changes}
        if len(folders) != len(changes):
            raise InvalidInput("each skill may appear once in a batch of changes")

        def decide(current: Current, revision_for: RevisionFor) -> tuple[Puts, ApplyResult]:
            problems = [_conflict(c, current[c.name], refuse_pinned) for c in changes]
            if whole and any(problems):
                return {}, ApplyResult((), tuple(p for p in problems if p is not None))
            puts: Puts = {}
            written: builtins.list[Skill] = []  # `list` is a method of this class
            for change, problem in zip(changes, problems, strict=True):
                found = current[change.name]
                if problem is not None:
                    continue
                if change.remove:
                    if found is not None:
                        puts[change.name] = None
                        written.append(found)
                    continue
                skill = _changed(change, found, folders[change.name])
                skill = replace(skill, revision=revision_for(found))
                puts[change.name] = skill
                written.append(skill)
            return puts, ApplyResult(tuple(written), tuple(p for p in problems if p))

        return self._storage.transact([c.name for c in changes], decide)

    def revert(self, records: Sequence[tuple[str, int | None, Skill | None]]) -> ApplyResult:
        """Put skills back as they were, under a new revision (the undo of a dream cycle):
        each (name, the revision it must have now, None: it must not exist; the record to write
        back, None: remove the record). A skill that moved since is left as it is and
        reported."""

        def decide(current: Current, revision_for: RevisionFor) -> tuple[Puts, ApplyResult]:
            now = dict(current)
            puts: Puts = {}
            written: builtins.list[Skill] = []
            conflicts: builtins.list[Conflict] = []
            for name, expect, record in records:
                had = now[name]
                found = None if had is None else had.revision
                if found != expect:
                    why = f"skill {name!r} changed since (revision {expect}, now {found})"
                    conflicts.append(Conflict(name, expect, found, why))
                    continue
                if record is not None:  # the old content under a new revision
                    record = replace(record, revision=revision_for(had))
                    written.append(record)
                puts[name] = now[name] = record
            return puts, ApplyResult(tuple(written), tuple(conflicts))

        return self._storage.transact(builtins.list(dict.fromkeys(r[0] for r in records)), decide)

    @staticmethod
    def _validated(change: SkillChange) -> SkillFolder | None:
        check_name(change.name, f"skill {change.name!r}")
        _check_choice(change.status, STATUSES, "status")
        _check_choice(change.origin, ORIGINS, "origin")
        if change.files is None:
            return None
        runnable = change.executable or ()
        return make_folder(change.name, change.files, f"skill {change.name!r}", runnable)

    def _one(self, change: SkillChange) -> Skill:
        result = self.apply([change])
        if result.conflicts:
            raise SkillConflict(result.conflicts)
        return result.written[0]

    def put(
        self,
        folder: SkillFolder,
        expect: int | None = NEW,
        *,
        origin: str = "user",
        status: str = "active",
    ) -> Skill:
        """Create (`expect=NEW`) or replace (`expect`: the revision read) one skill."""
        change = SkillChange(
            folder.name,
            expect,
            dict(folder.files),
            status,
            None,
            origin,
            executable=folder.executable,
        )
        return self._one(change)

    def set_status(self, name: str, status: str, expect: int | None = ANY_REVISION) -> Skill:
        self.get(name)
        return self._one(SkillChange(name, expect, status=status))

    def archive(self, name: str, expect: int | None = ANY_REVISION) -> Skill:
        return self.set_status(name, "archived", expect)

    def restore(self, name: str, expect: int | None = ANY_REVISION) -> Skill:
        return self.set_status(name, "active", expect)

    def approve(self, name: str, expect: int | None = ANY_REVISION) -> Skill:
        if self.get(name).status != "candidate":
            raise InvalidInput(f"skill {name!r} is not a candidate; only candidates are approved")
        return self.set_status(name, "active", expect)

    def pin(self, name: str, pinned: bool = True, expect: int | None = ANY_REVISION) -> Skill:
        self.get(name)
        return self._one(SkillChange(name, expect, pinned=pinned))


def _by_name(skill: Skill) -> str:
    return skill.name


def _conflict(change: SkillChange, current: Skill | None, refuse_pinned: bool) -> Conflict | None:
    found = None if current is None else current.revision
    if change.expect is NEW and current is not None:
        reason = f"skill {change.name!r} already exists (revision {found})"
    elif change.expect is not NEW and current is None:
        reason = f"no skill named {change.name!r}"
    elif change.expect not in (NEW, ANY_REVISION) and change.expect != found:
        reason = (
            f"skill {change.name!r} changed since it was read (revision {change.expect}, now "
            f"{found}); read it again"
        )
    elif refuse_pinned and current is not None and current.pinned:
        reason = f"skill {change.name!r} is pinned; it is never changed by the dream"
    else:
        return None
    return Conflict(change.name, change.expect, found, reason)


def _changed(change: SkillChange, current: Skill | None, folder: SkillFolder | None) -> Skill:
    now = utcnow().isoformat()
    if current is None:
        if folder is None:
            raise InvalidInput(f"a new skill {change.name!r} needs its files")
        current = Skill(new_id(), change.name, 0, "active", "user", False, now, now, {}, {}, "")
    out = replace(current, revision=current.revision + 1, updated_at=now)
    if folder is not None:
        kept = current.executable if change.executable is None else change.executable
        out = replace(
            out,
            files=dict(folder.files),
            front_matter=folder.front_matter,
            body=folder.body,
            executable=frozenset(p for p in kept if p in folder.files),
        )
    if change.status is not None:
        out = replace(out, status=change.status)
    if change.origin is not None:
        out = replace(out, origin=change.origin)
    if change.pinned is not None:
        out = replace(out, pinned=change.pinned)
    if change.see_also is not None:
        out = replace(out, see_also=tuple(change.see_also))
    if change.created_at is not None:
        out = replace(out, created_at=change.created_at)
    if change.project is not None:
        out = replace(out, project=change.project or None)
    return out
