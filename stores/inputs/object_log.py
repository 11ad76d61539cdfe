"""An input log (conversation, feedback, recall, skill usage, the enrich queue) on an object
store: `logs/<name>/<time_ns>-<random>.json`, one object per appended record.

Why one object per append: an append is then one PUT of a new name (`If-None-Match: *`), as
cheap and as atomic as it can be on an object store, and appends from any number of
replicas never contend (a log kept as segments replaced with compare-and-set would make
every concurrent append a lost race to retry, each retry a GET and a PUT of the whole
segment). The names sort by time, so reading is one LIST plus a GET of each object this
process has not read before (objects are never changed, so what was read is remembered).
Consuming (the second half of the dream's two-phase take) deletes exactly the objects whose
records were read; a record appended meanwhile is another object and stays. The bound
(`max_bytes`): a process that appended an eighth of it since it last looked sums the sizes
(one LIST) and, past the bound, deletes the oldest half of the records, as the local log
does; so the log exceeds the bound by at most an eighth per appending replica. An object
that is not a JSON record is moved to `logs/<name>.corrupt/` when the log is consumed.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dreamwell.stores.remote.blobs import CREATE, Blobs

logger = logging.getLogger(__name__)

PARALLEL = 8  # GETs and DELETEs in flight at once
_seen: dict[tuple[str, str], dict[str, dict[str, Any] | None]] = {}  # read records, per log
_seen_lock = threading.Lock()


def _record(data: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(data.decode("utf-8"))
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


class BlobLog:
    def __init__(self, blobs: Blobs, max_bytes: int | None) -> None:
        self.blobs = blobs
        self.max_bytes = max_bytes
        self._appended = 0

    def append(self, line: bytes) -> None:
        name = f"{time.time_ns():019d}-{secrets.token_hex(4)}.json"
        self.blobs.write(name, line, CREATE)
        if self.max_bytes is not None:
            self._appended += len(line)
            if self._appended > self.max_bytes // 8:
                self._appended = 0
                self._bound(self.max_bytes)

    def _bound(self, max_bytes: int) -> None:
        sizes = self.blobs.sizes()
        if sum(sizes.values()) > max_bytes:
            names = sorted(sizes)
            self._delete(names[: len(names) // 2])
            counted = f"{time.time_ns():019d}-{secrets.token_hex(4)}.json"
            self._counts().write(counted, json.dumps(len(names) // 2).encode(), CREATE)

    def _counts(self) -> Blobs:
        """One object per trim, holding how many records it dropped (`dropped` sums them)."""
        return Blobs(self.blobs.remote, self.blobs.folder + ".dropped")

    def dropped(self) -> int:
        counts = self._counts()
        total = 0
        for name in counts.names():
            found = counts.read(name)
            try:
                total += int(json.loads(found[0])) if found is not None else 0
            except (ValueError, TypeError):
                continue
        return total

    def _records(self) -> list[tuple[str, dict[str, Any] | None]]:
        """(object name, record or None when damaged), oldest first."""
        names = sorted(n for n in self.blobs.names() if n.endswith(".json"))
        with _seen_lock:
            seen = _seen.setdefault((self.blobs.remote.uri, self.blobs.folder), {})
            for gone in set(seen) - set(names):
                del seen[gone]
            missing = [n for n in names if n not in seen]

        def fetch(name: str) -> tuple[str, dict[str, Any] | None] | None:
            found = self.blobs.read(name)
            return None if found is None else (name, _record(found[0]))

        with ThreadPoolExecutor(PARALLEL) as pool:
            fetched = [f for f in pool.map(fetch, missing) if f is not None]
        with _seen_lock:
            seen.update(fetched)
            return [(n, seen[n]) for n in names if n in seen]

    def _delete(self, names: Iterable[str]) -> None:
        with ThreadPoolExecutor(PARALLEL) as pool:
            list(pool.map(self.blobs.delete, names))

    def read(self) -> list[dict[str, Any]]:
        records = self._records()
        bad = sum(1 for _, r in records if r is None)
        if bad:
            logger.warning("%s: skipped %d damaged records", self.blobs.folder, bad)
        return [r for _, r in records if r is not None]

    def _remove(
        self, chosen: Callable[[dict[str, Any]], bool], aside: bool = True
    ) -> list[dict[str, Any]]:
        """Delete the records `chosen` picks (and move damaged ones aside); returns them."""
        records = self._records()
        damaged = [n for n, r in records if r is None] if aside else []
        if damaged:
            kept = Blobs(self.blobs.remote, self.blobs.folder + ".corrupt")
            for name in damaged:
                found = self.blobs.read(name)
                if found is not None:
                    kept.write(name, found[0], None)
            logger.error("%s: moved %d damaged records aside", self.blobs.folder, len(damaged))
        taken = [(n, r) for n, r in records if r is not None and chosen(r)]
        self._delete([*damaged, *(n for n, _ in taken)])
        return [r for _, r in taken]

    def consume(self, records: Sequence[Mapping[str, Any]], key: Callable[[Any], str]) -> None:
        pending = Counter(key(r) for r in records)

        def chosen(record: dict[str, Any]) -> bool:
            if pending[key(record)] > 0:
                pending[key(record)] -= 1
                return True
            return False

        self._remove(chosen)

    def drop(self, keep: Callable[[dict[str, Any]], bool]) -> None:
        self._remove(lambda record: not keep(record), aside=False)

    def take(self) -> list[dict[str, Any]]:
        return self._remove(lambda _record: True)
