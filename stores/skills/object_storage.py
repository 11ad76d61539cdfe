"""A skills catalog on object storage (a data directory given as `s3://bucket/prefix`).

Objects, under the location (a tenant's: `tenants/<name>/`):
    skills/.generation                 the catalog's manifest and its one commit point:
                                       {"generation": N, "skills": {name: {"revision", "key"}}}
    skills/<name>/<revision:012d>-<nonce>.json
                                       one skill's record at one revision (the record format
                                       of a local data directory); written once, never replaced
A write (one skill or a batch) reads the manifest, lets the catalog decide against the
records it names, writes each new record as a new object, then replaces the manifest only if
it is still the version read (If-Match on its ETag; If-None-Match when there is none yet).
That replace is the commit: a batch lands whole or not at all, readers see it whole, and a
writer that lost the race deletes its new objects, reads again and decides again (so a
compare-and-set that no longer holds is refused with what is stored now). Every record a
commit writes gets revision N+1, the manifest's new generation: a revision is never handed
out twice, whichever replica writes. Records the commit replaced or removed are deleted after
it; every SWEEP_EVERY generations so are objects at or below the committed generation that the
manifest does not name (left by a writer that crashed between its records and its commit).

Readers keep the records they have read (an object never changes), in memory and as files in
the replica's cache directory (`skills/<name>/<revision>-<nonce>.json` there too: a new
process, a hook say, reads only the manifest from the store), and check the manifest's ETag
with one HEAD: a change by another replica is seen within FRESH seconds by reads, at
once by `version()` (the servers' watch) and by this catalog's own writes. While the store
cannot be reached, reads keep the catalog last read; writes and `version()` fail in one line.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dreamwell.stores.errors import StoreBusy, StoreError, StoreUnreachable
from dreamwell.stores.files import write_atomic
from dreamwell.stores.remote.blobs import CREATE, Blobs, Conflict, hung
from dreamwell.stores.remote.location import Remote
from dreamwell.stores.skills.record import Skill, skill_from_json, skill_to_json
from dreamwell.stores.skills.storage import Current, Decide, T, read_record

logger = logging.getLogger(__name__)

MANIFEST = ".generation"
FRESH = 0.5  # seconds a read trusts the manifest it last checked
READ_WAIT = 0.5  # seconds a read waits for the manifest's check it started
RETRIES = 30
FETCHERS = 8  # records fetched at once by a replica that has none of them yet
SWEEP_EVERY = 16  # generations between sweeps for records no commit names


def _empty() -> dict[str, Any]:
    return {"generation": 0, "skills": {}}


class _Gone(Exception):
    """A record the manifest named was deleted: a newer commit replaced it."""


class BlobSkills:
    blocking = True

    def __init__(self, remote: Remote, cache: Path) -> None:
        self.remote = remote
        self._cache = cache
        self._blobs = Blobs(remote, "skills")
        self._etag: str | None = None
        self._manifest = _empty()
        self._checked = float("-inf")
        self._records: dict[str, Skill] = {}  # by object key: an object never changes
        self._state = threading.Lock()
        self._asking = threading.Lock()
        self._check: threading.Thread | None = None  # a reader's check of the manifest
        self._read_once = False  # the skills were read: while the store hangs, they are served

    # ---- the manifest ----------------------------------------------------------------------
    def _refresh(self, max_age: float) -> tuple[str | None, dict[str, Any]]:
        """The manifest's (ETag, content), checked with a HEAD when older than `max_age`."""
        with self._state:
            if time.monotonic() - self._checked < max_age:
                return self._etag, self._manifest
            etag = self._blobs.version(MANIFEST)
            if etag != self._etag:
                self._etag, self._manifest = self._read_manifest()
            self._checked = time.monotonic()
            return self._etag, self._manifest

    def _read_manifest(self) -> tuple[str | None, dict[str, Any]]:
        found = self._blobs.read(MANIFEST)
        if found is None:
            return None, _empty()
        try:
            manifest = json.loads(found[0])
            int(manifest["generation"]), dict(manifest["skills"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"{self.remote.uri}/skills/{MANIFEST} is unreadable ({exc}); the skills cannot "
                "be read or written until it is restored"
            ) from None
        return found[1], manifest

    def generation(self) -> int:
        """The generation; with the store unreachable, the one last read (if any), so
        readers keep the catalog they had; writes and `version()` fail instead. Once one was
        read, a reader never waits on the store: the check runs on a thread of its own, the
        read that started it waits for it at most READ_WAIT seconds (not at all while another
        call to the store hangs, or another check is under way) and then serves the held one."""
        if time.monotonic() - self._checked < FRESH:  # no lock: a HEAD in flight holds it
            return int(self._manifest["generation"])
        if self._checked == float("-inf"):
            return self._generation()  # nothing held yet: the store's answer is the only one
        with self._asking:
            check = self._check
            started = check is None or not check.is_alive()
            if started:
                check = self._check = threading.Thread(
                    target=self._check_quietly, name="dreamwell-skills-check", daemon=True
                )
                check.start()
        if started and check is not None:
            check.join(0 if hung(self.remote, READ_WAIT) else READ_WAIT)
        return int(self._manifest["generation"])

    def _check_quietly(self) -> None:
        try:
            self._generation()
        except StoreError as exc:  # on the check's thread: the next read tries again
            logger.warning("skills served as last read from %s: %s", self.remote.uri, exc)

    def _generation(self) -> int:
        try:
            return int(self._refresh(FRESH)[1]["generation"])
        except StoreUnreachable as exc:
            with self._state:
                if self._checked == float("-inf"):
                    raise
                self._checked = time.monotonic()  # the next try after FRESH seconds
                logger.warning("skills served as last read from %s: %s", self.remote.uri, exc)
                return int(self._manifest["generation"])

    def version(self) -> object:
        return self._refresh(0.0)[0]

    # ---- records ---------------------------------------------------------------------------
    def _record(self, key: str) -> Skill | None:
        """The record at `key`, None when unreadable; _Gone when a newer commit removed it."""
        known = self._records.get(key) or read_record(self._cache / key, quiet=True)
        if known is not None:
            self._records[key] = known
            return known
        found = self._blobs.read(key)
        if found is None:
            raise _Gone(key)
        try:
            text = found[0].decode("utf-8")
            skill = skill_from_json(text)
        except (ValueError, KeyError, TypeError, StoreError) as exc:
            logger.warning("skill record %s is unreadable and is skipped: %s", key, exc)
            return None
        self._records[key] = skill
        self._keep(key, text)
        return skill

    def _keep(self, key: str, text: str) -> None:
        """A copy in the cache directory (best effort: the store has the record)."""
        try:
            (self._cache / key).parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self._cache / key, text)
        except OSError as exc:
            logger.warning("cannot cache skill record %s: %s", key, exc)

    def _forget(self, keys: set[str]) -> None:
        """Drop the copies of records no longer named (memory and the cache directory)."""
        self._records = {k: v for k, v in self._records.items() if k in keys}
        for path in self._cache.glob("*/*.json"):
            key = path.relative_to(self._cache).as_posix()
            if key not in keys:
                path.unlink(missing_ok=True)

    def _load(self, manifest: dict[str, Any], names: Sequence[str]) -> Current | None:
        """The named skills' records as the manifest says (None when one has gone since)."""
        keys = {n: str(e["key"]) for n in names if (e := manifest["skills"].get(n)) is not None}
        try:
            missing = [k for k in keys.values() if k not in self._records]
            if len(missing) > 1:  # a new replica: fetch them side by side
                with ThreadPoolExecutor(FETCHERS) as pool:
                    list(pool.map(self._record, missing))
            return {n: None if n not in keys else self._record(keys[n]) for n in names}
        except _Gone:
            return None

    def read_all(self) -> tuple[int, dict[str, Skill]]:
        if not self._read_once and hung(self.remote, READ_WAIT):  # a reader never waits on it
            raise StoreUnreachable(
                f"cannot read {self.remote.uri}/skills: the object store does not answer"
            )
        for _ in range(RETRIES):
            _, manifest = self._refresh(FRESH)
            current = self._load(manifest, sorted(manifest["skills"]))
            if current is not None:
                self._forget({str(e["key"]) for e in manifest["skills"].values()})
                skills = {n: s for n, s in current.items() if s is not None}
                self._read_once = True
                return int(manifest["generation"]), skills
            self._refresh(0.0)  # a record was replaced under us: the manifest has moved
        raise StoreBusy("the skills kept changing under other writers; try again")

    # ---- writing ---------------------------------------------------------------------------
    def transact(self, names: Sequence[str], decide: Decide[T]) -> T:
        for attempt in range(RETRIES):
            etag, manifest = self._read_manifest()
            self._seen(etag, manifest)  # a refused write then shows what is stored now
            current = self._load(manifest, names)
            if current is None:
                continue
            generation = int(manifest["generation"]) + 1
            puts, out = decide(current, _Fixed(generation))
            if not puts:
                return out
            new, keys = self._stage(manifest, generation, puts)
            try:
                tag = self._blobs.write(MANIFEST, _dump(new), CREATE if etag is None else etag)
            except Conflict:
                for key in keys:
                    self._blobs.delete(key)
                time.sleep(random.uniform(0, 0.005 * (attempt + 1)))
                continue
            self._seen(tag, new)
            self._sweep(manifest, new)
            return out
        raise StoreBusy("the skills kept changing under other writers; try again")

    def _stage(
        self, manifest: dict[str, Any], generation: int, puts: dict[str, Skill | None]
    ) -> tuple[dict[str, Any], list[str]]:
        """Write each new record as a new object (side by side); the manifest that would
        commit them."""
        skills = dict(manifest["skills"])
        staged: dict[str, tuple[Skill, str]] = {}
        for name, record in puts.items():
            skills.pop(name, None)
            if record is not None:
                key = f"{name}/{generation:012d}-{uuid.uuid4().hex[:12]}.json"
                staged[key] = (record, skill_to_json(record))
                skills[name] = {"revision": record.revision, "key": key}

        def put(key: str) -> None:
            self._blobs.write(key, staged[key][1].encode("utf-8"), CREATE)

        if len(staged) > 1:
            with ThreadPoolExecutor(FETCHERS) as pool:
                list(pool.map(put, staged))
        else:
            for key in staged:
                put(key)
        for key, (record, text) in staged.items():
            self._records[key] = record
            self._keep(key, text)
        return {"generation": generation, "skills": skills}, list(staged)

    def _seen(self, etag: str | None, manifest: dict[str, Any]) -> None:
        """Remember the newest manifest read or written (a concurrent refresh may be newer)."""
        with self._state:
            if int(manifest["generation"]) >= int(self._manifest["generation"]):
                self._etag, self._manifest, self._checked = etag, manifest, time.monotonic()

    def _sweep(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """Delete the records the commit replaced or removed; every SWEEP_EVERY generations
        also any record at or below it that no commit names (a writer that crashed between
        its records and its commit left it). Best effort: the next sweep finds what is left."""
        named = {str(e["key"]) for e in new["skills"].values()}
        generation = int(new["generation"])
        try:
            for entry in old["skills"].values():
                if str(entry["key"]) not in named:
                    self._blobs.delete(str(entry["key"]))
            if generation % SWEEP_EVERY == 0:
                for key in self._blobs.names():
                    if key != MANIFEST and key not in named and _revision_of(key) <= generation:
                        self._blobs.delete(key)
        except StoreError as exc:
            logger.warning("old skill records were left in %s: %s", self.remote.uri, exc)


class _Fixed:
    """Every record of one commit gets the commit's generation as its revision."""

    def __init__(self, revision: int) -> None:
        self.revision = revision

    def __call__(self, _current: Skill | None) -> int:
        return self.revision


def _revision_of(key: str) -> int:
    try:
        return int(key.rsplit("/", 1)[-1].split("-", 1)[0])
    except ValueError:
        return 1 << 62  # not ours: never deleted


def _dump(manifest: dict[str, Any]) -> bytes:
    return json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode("utf-8")
