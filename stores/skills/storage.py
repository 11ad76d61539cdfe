"""Where a skills catalog keeps its records: the seam between `SkillCatalog` and its storage.

`SkillCatalog` (stores/skills/catalog.py) decides what a write does; a storage reads records and
commits a batch of them. Two implementations:
- `FileSkills` (here): a local data directory, the layout docs/data-directory.md gives: one
  `skills/<name>.json` per skill, written under `skills.lock`, `skills/.generation` bumped
  by every write and stat-ed by the servers' watch;
- `BlobSkills` (stores/skills/object_storage.py): an object-store data directory (`DataDir.remote`).
`open_storage(layout)` (stores/skills/catalog.py) is the one place that chooses.

A batch is `transact(names, decide)`: the storage reads the named skills' current records,
calls `decide(current, revision_for)` -> (records to write by name, None to remove; the
caller's result), and writes them. `revision_for(current)` is the revision a written record
gets: never one the catalog has handed out before, so a writer holding an old revision never
matches again. `decide` must be a pure function of its arguments (a storage may call it
again after losing a race).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, TypeVar

from filelock import FileLock, Timeout

from dreamwell.stores.errors import StoreBusy, StoreError, WriteFailed
from dreamwell.stores.files import write_atomic
from dreamwell.stores.layout import DataDir
from dreamwell.stores.skills.record import Skill, skill_from_json, skill_to_json

logger = logging.getLogger(__name__)

T = TypeVar("T")
Current = dict[str, Skill | None]
RevisionFor = Callable[[Skill | None], int]
Decide = Callable[[Current, RevisionFor], tuple[dict[str, Skill | None], T]]


class SkillStorage(Protocol):
    blocking: bool  # whether reading the version waits on the network (object storage)

    def generation(self) -> int:
        """The catalog's generation (0 before the first write), bumped by every write."""
        ...

    def version(self) -> object:
        """A cheap token that moves when the generation may have (what a watch polls)."""
        ...

    def read_all(self) -> tuple[int, dict[str, Skill]]:
        """(generation, every readable record by name), the generation read first."""
        ...

    def transact(self, names: Sequence[str], decide: Decide[T]) -> T: ...


def read_record(path: Path, quiet: bool = False) -> Skill | None:
    """The record in `path`; None when there is none or it is unreadable (logged unless
    `quiet`)."""
    try:
        return skill_from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, StoreError) as exc:
        if not quiet:
            logger.warning("skill record %s is unreadable and is skipped: %s", path, exc)
        return None


class FileSkills:
    """Records as files in a local data directory. A batch's records are written one after
    another under one lock hold (temp file + fsync + rename each), then the generation is
    bumped and the folder fsynced: a crash part-way leaves some of them written (each whole),
    never a torn record."""

    blocking = False

    def __init__(self, layout: DataDir, lock_timeout: float = 15.0) -> None:
        self.layout = layout
        self._lock = FileLock(str(layout.skills_lock), timeout=lock_timeout)

    def generation(self) -> int:
        try:
            return int(self.layout.skills_generation.read_text(encoding="ascii").strip() or 0)
        except (OSError, ValueError):
            return 0

    def version(self) -> object:
        try:
            st = os.stat(self.layout.skills_generation)
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def read_all(self) -> tuple[int, dict[str, Skill]]:
        generation = self.generation()
        out: dict[str, Skill] = {}
        folder = self.layout.skills
        if folder.is_dir():
            for path in sorted(folder.glob("*.json")):
                skill = read_record(path)
                if skill is not None:
                    out[skill.name] = skill
        return generation, out

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

    def _revision_for(self, current: Skill | None) -> int:
        """One past the skill's revision; for a skill that is (re)created, past every
        revision the catalog has handed out (its generation)."""
        return self.generation() + 1 if current is None else current.revision + 1

    def transact(self, names: Sequence[str], decide: Decide[T]) -> T:
        folder = self.layout.skills
        with self._locked():
            try:
                folder.mkdir(parents=True, exist_ok=True)
                current: Current = {n: read_record(folder / f"{n}.json") for n in names}
                puts, out = decide(current, self._revision_for)
                for name, record in puts.items():
                    path = folder / f"{name}.json"
                    if record is None:
                        path.unlink(missing_ok=True)
                    else:
                        write_atomic(path, skill_to_json(record))
                if puts:
                    self._bump()
            except OSError as exc:
                raise WriteFailed(
                    f"the skills could not be written ({exc.strerror or exc}); check the data "
                    "directory's free space and permissions"
                ) from exc
        return out

    def _bump(self) -> None:
        write_atomic(self.layout.skills_generation, str(self.generation() + 1))
        fd = os.open(self.layout.skills, os.O_RDONLY)
        try:
            os.fsync(fd)  # the renames of the records and of the generation are durable
        finally:
            os.close(fd)
