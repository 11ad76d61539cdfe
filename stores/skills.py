"""The skills store (SPEC §7, DESIGN.md): one JSON record per skill, per tenant.

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
per SPEC §7, its name equal to the change's name): bad content raises InvalidSkill before
anything is written. Usage is not here: stores/skillusage.py (SkillUsage.record_use / stats).

Writes take `skills.lock` (safe with several processes), check each skill's `revision`
against the one the writer read, write each record as temp file + fsync + rename, then bump
`skills/.generation` and fsync the folder. `apply` writes its records one after another under
one lock hold: a crash part-way leaves some of them written (each whole), never a torn record;
a moved revision leaves that skill out and reports it, the others are written.
"""

from __future__ import annotations

import builtins
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from filelock import FileLock, Timeout

from dreamwell.stores.errors import InvalidInput, NotFound, StoreBusy, StoreError, WriteFailed
from dreamwell.stores.layout import DataDir
from dreamwell.stores.model import new_id, utcnow
from dreamwell.stores.skillfmt import SkillFolder, check_name
from dreamwell.stores.skillio import make_folder
from dreamwell.stores.skillrecord import Skill as Skill  # re-exported: the public name
from dreamwell.stores.skillrecord import skill_from_json, skill_to_json
from dreamwell.stores.state import write_atomic

if TYPE_CHECKING:
    from dreamwell.stores.embedding import Embedder
    from dreamwell.stores.skillsearch import SkillIndex, VectorCache

logger = logging.getLogger(__name__)

STATUSES = ("active", "candidate", "archived")
ORIGINS = ("user", "dream", "import")
NEW: int | None = None  # `expect` of a skill that must not exist yet
ANY_REVISION = -1  # `expect` that skips the compare-and-set (user commands)


class SkillConflict(StoreError):
    """A compare-and-set write found another revision (or a pinned skill): nothing written."""

    def __init__(self, conflicts: Sequence[Conflict]) -> None:
        super().__init__("; ".join(c.reason for c in conflicts))
        self.conflicts = tuple(conflicts)


@dataclass(frozen=True)
class SkillChange:
    """One skill's change in `apply`. `expect`: the revision the writer read (NEW: the skill
    must not exist yet; ANY_REVISION: no check). `files` replaces every file (validated, the
    SKILL.md's name must be `name`); None fields stay as they are. `created_at` (ISO time)
    lets a merge keep the earliest creation. `remove` deletes the record: only for undoing
    the creation of a skill (a skill is otherwise archived, never deleted)."""

    name: str
    expect: int | None
    files: Mapping[str, bytes] | None = None
    status: str | None = None
    pinned: bool | None = None
    origin: str | None = None
    see_also: tuple[str, ...] | None = None
    created_at: str | None = None
    remove: bool = False


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
        self._lock = FileLock(str(self.layout.skills_lock), timeout=lock_timeout)
        self._snapshot = _Snapshot(-1, {})
        self._index: tuple[int, SkillIndex] | None = None
        self._embedder = embedder
        self._vectors: VectorCache | None = None  # made on first search (loads Tantivy, numpy)
        self._min_similarity = min_similarity
        self._reading = threading.Lock()

    # ---- reading ---------------------------------------------------------------------------
    def generation(self) -> int:
        """The catalog's generation (0 before the first write); one small file read."""
        try:
            return int(self.layout.skills_generation.read_text(encoding="ascii").strip() or 0)
        except (OSError, ValueError):
            return 0

    def _current(self) -> _Snapshot:
        generation = self.generation()
        snap = self._snapshot
        if snap.generation == generation:
            return snap
        with self._reading:
            if self._snapshot.generation != generation:
                self._snapshot = _Snapshot(generation, self._read_all())
            return self._snapshot

    def _read_all(self) -> dict[str, Skill]:
        out: dict[str, Skill] = {}
        folder = self.layout.skills
        if not folder.is_dir():
            return out
        for path in sorted(folder.glob("*.json")):
            skill = self._read(path)
            if skill is not None:
                out[skill.name] = skill
        return out

    def _read(self, path: Path) -> Skill | None:
        try:
            return skill_from_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, StoreError) as exc:
            logger.warning("skill record %s is unreadable and is skipped: %s", path, exc)
            return None

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
        from dreamwell.stores.skillsearch import SkillIndex, VectorCache

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
    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self._lock.acquire()
        except Timeout as exc:
            raise StoreBusy("the skills are being written by another process; try again") from exc
        except OSError as exc:
            raise WriteFailed(f"cannot lock the skills ({exc.strerror or exc})") from exc
        try:
            yield
        finally:
            self._lock.release()

    def apply(
        self, changes: Sequence[SkillChange], *, refuse_pinned: bool = False, whole: bool = False
    ) -> ApplyResult:
        """Write several skills under one lock, each compare-and-set: a change whose skill
        moved (or, with `refuse_pinned`, is pinned) is left out and reported as a conflict; the
        others are written (with `whole`, none is: the changes stand or fall together). Bad
        content (InvalidInput) refuses the whole call, nothing written."""
        folders = {c.name: self._validated(c) for c in changes}
        if len(folders) != len(changes):
            raise InvalidInput("each skill may appear once in a batch of changes")
        written: builtins.list[Skill] = []  # `list` is a method of this class
        conflicts: builtins.list[Conflict] = []
        with self._locked():
            try:
                self.layout.skills.mkdir(parents=True, exist_ok=True)
                found = [self._read(self.layout.skills / f"{c.name}.json") for c in changes]
                problems = [
                    _conflict(c, f, refuse_pinned) for c, f in zip(changes, found, strict=True)
                ]
                if whole and any(problems):
                    return ApplyResult((), tuple(p for p in problems if p is not None))
                for change, current, problem in zip(changes, found, problems, strict=True):
                    if problem is not None:
                        conflicts.append(problem)
                        continue
                    path = self.layout.skills / f"{change.name}.json"
                    if change.remove:
                        path.unlink(missing_ok=True)
                        written += [current] if current is not None else []
                        continue
                    skill = _changed(change, current, folders[change.name])
                    skill = replace(skill, revision=self._next_revision(current))
                    write_atomic(path, skill_to_json(skill))
                    written.append(skill)
                if written:
                    self._bump()
            except OSError as exc:
                raise WriteFailed(
                    f"the skills could not be written ({exc.strerror or exc}); check the data "
                    "directory's free space and permissions"
                ) from exc
        return ApplyResult(tuple(written), tuple(conflicts))

    def revert(self, records: Sequence[tuple[str, int | None, Skill | None]]) -> ApplyResult:
        """Put skills back as they were, under a new revision (the undo of a dream cycle):
        each (name, the revision it must have now, None: it must not exist; the record to write
        back, None: remove the record). A skill that moved since is left as it is and
        reported."""
        written: builtins.list[Skill] = []
        conflicts: builtins.list[Conflict] = []
        with self._locked():
            try:
                self.layout.skills.mkdir(parents=True, exist_ok=True)
                for name, expect, record in records:
                    path = self.layout.skills / f"{name}.json"
                    current = self._read(path)
                    found = None if current is None else current.revision
                    if found != expect:
                        why = f"skill {name!r} changed since (revision {expect}, now {found})"
                        conflicts.append(Conflict(name, expect, found, why))
                    elif record is None:
                        path.unlink(missing_ok=True)
                    else:  # the old content under a new revision: a revision never comes back
                        record = replace(record, revision=self._next_revision(current))
                        write_atomic(path, skill_to_json(record))
                        written.append(record)
                if len(conflicts) < len(records):
                    self._bump()
            except OSError as exc:
                raise WriteFailed(
                    f"the skills could not be written ({exc.strerror or exc})"
                ) from exc
        return ApplyResult(tuple(written), tuple(conflicts))

    @staticmethod
    def _validated(change: SkillChange) -> SkillFolder | None:
        check_name(change.name, f"skill {change.name!r}")
        _check_choice(change.status, STATUSES, "status")
        _check_choice(change.origin, ORIGINS, "origin")
        if change.files is None:
            return None
        return make_folder(change.name, change.files, f"skill {change.name!r}")

    def _next_revision(self, current: Skill | None) -> int:
        """The revision a write gives a skill: one past its current one, and for a skill that
        is (re)created, past every revision the catalog has handed out (its generation), so a
        writer holding a revision of a removed or reverted skill never matches again."""
        if current is not None:
            return current.revision + 1
        return self.generation() + 1

    def _bump(self) -> None:
        write_atomic(self.layout.skills_generation, str(self.generation() + 1))
        fd = os.open(self.layout.skills, os.O_RDONLY)
        try:
            os.fsync(fd)  # the renames of the records and of the generation are durable
        finally:
            os.close(fd)

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
        change = SkillChange(folder.name, expect, dict(folder.files), status, None, origin)
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
        out = replace(
            out, files=dict(folder.files), front_matter=folder.front_matter, body=folder.body
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
    return out
