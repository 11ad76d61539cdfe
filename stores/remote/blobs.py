"""Small objects in an object-store data directory, written with compare-and-set.

The stores other than long-term memory (working memory, skills, dream reports and their lock,
the input logs) keep, on a local data directory, a few files each that they rewrite under a
file lock. On object storage there is no lock across machines; instead each object is
replaced only if it is still the version the writer read (`If-Match: <ETag>`), or created only
if it does not exist yet (`If-None-Match: *`). `Blobs.update` is the read-change-write loop
every such store needs: it reads, lets the caller compute the new bytes, writes them
conditionally, and on a lost race reads again and recomputes.

    blobs = Blobs(remote, "working-memory")
    blobs.update("session.json", lambda old: add_entry(old))

Errors reaching the store are `StoreUnreachable` (one line); nothing partial is ever visible:
an object is replaced whole or not at all.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from dreamwell.stores.errors import StoreBusy, StoreError, StoreUnreachable
from dreamwell.stores.files import write_atomic
from dreamwell.stores.remote.location import MARKER, Remote, attached, describe

CREATE = "create"  # `expect` for write: only if the object does not exist
RETRIES = 30


class Conflict(Exception):
    """The object changed (or appeared) since the writer read it: nothing was written."""


class Blobs:
    """The objects under `<location>/<folder>/`."""

    def __init__(self, remote: Remote, folder: str) -> None:
        self.remote = remote
        self.folder = folder.strip("/")

    def _key(self, name: str) -> str:
        if not name or name.startswith("/") or ".." in name.split("/"):
            raise ValueError(f"bad object name {name!r}")
        return f"{self.folder}/{name}"

    def read(self, name: str) -> tuple[bytes, str] | None:
        """(bytes, version) of the object, None when it does not exist."""
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            with _asking(self.remote):
                got = obstore.get(objects(self.remote), self._key(name))
                data = bytes(got.bytes())
        except (NotFoundError, FileNotFoundError):
            return None
        except Exception as exc:
            raise _unreachable("read", self.remote, exc) from None
        return data, str(got.meta["e_tag"] or "")

    def version(self, name: str) -> str | None:
        """The object's version (its ETag) without reading it; None when absent."""
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            with _asking(self.remote):
                return str(obstore.head(objects(self.remote), self._key(name))["e_tag"] or "")
        except (NotFoundError, FileNotFoundError):
            return None
        except Exception as exc:
            raise _unreachable("read", self.remote, exc) from None

    def write(self, name: str, data: bytes, expect: str | None) -> str:
        """Write `data`; `expect`: the version read (replace only that), CREATE (only if
        absent) or None (unconditionally). Returns the new version; raises Conflict."""
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        mode: Any = (
            "overwrite" if expect is None else CREATE if expect == CREATE else {"e_tag": expect}
        )
        try:
            with _asking(self.remote):
                result = obstore.put(objects(self.remote), self._key(name), data, mode=mode)
        except (AlreadyExistsError, PreconditionError) as exc:
            raise Conflict(f"{self.folder}/{name} changed meanwhile") from exc
        except Exception as exc:
            if expect is None:
                raise _unreachable("write to", self.remote, exc) from None
            return self._settle(name, data, exc)
        return str(result["e_tag"] or "")

    def _settle(self, name: str, data: bytes, exc: Exception) -> str:
        """A conditional write whose answer never came (a time-out: SeaweedFS answers racing
        conditional writes of one key about a second apart, so the eighth racer waits past
        the client's time-out) either landed or lost: read the object back to tell which."""
        now = self.read(name)  # raises StoreUnreachable when the store is really gone
        if now is not None and now[0] == data:
            return now[1]
        if now is None:
            raise _unreachable("write to", self.remote, exc) from None
        raise Conflict(f"{self.folder}/{name} changed meanwhile")

    def delete(self, name: str) -> None:
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            with _asking(self.remote):
                obstore.delete(objects(self.remote), self._key(name))
        except (NotFoundError, FileNotFoundError):
            pass
        except Exception as exc:
            raise _unreachable("delete in", self.remote, exc) from None

    def names(self) -> dict[str, str]:
        """Every object in the folder (names relative to it) and its version."""
        import obstore

        try:
            with _asking(self.remote):
                listed = obstore.list(objects(self.remote), self.folder + "/").collect()
        except Exception as exc:
            raise _unreachable("list", self.remote, exc) from None
        cut = len(self.folder) + 1
        return {str(m["path"])[cut:]: str(m["e_tag"] or "") for m in listed}

    def sizes(self) -> dict[str, int]:
        """Every object in the folder (names relative to it) and its size in bytes."""
        import obstore

        try:
            with _asking(self.remote):
                listed = obstore.list(objects(self.remote), self.folder + "/").collect()
        except Exception as exc:
            raise _unreachable("list", self.remote, exc) from None
        cut = len(self.folder) + 1
        return {str(m["path"])[cut:]: int(m["size"]) for m in listed}

    def update(self, name: str, change: Callable[[bytes | None], bytes | None]) -> bytes | None:
        """Read, `change(old) -> new` (None: leave the object as it is), write if still the
        version read; on a lost race read again and call `change` again. Returns what was
        written (or None). `change` must be a pure function of its argument."""
        written = self.update_versioned(name, lambda old, _version: change(old))
        return written[0] if written else None

    def update_versioned(
        self, name: str, change: Callable[[bytes | None, str | None], bytes | None]
    ) -> tuple[bytes, str] | None:
        """`update`, with the version read given to `change` (None: absent) and the version
        written returned beside the bytes (None when `change` declined)."""
        for attempt in range(RETRIES):
            found = self.read(name)
            new = change(found[0] if found else None, found[1] if found else None)
            if new is None:
                return None
            try:
                return new, self.write(name, new, found[1] if found else CREATE)
            except Conflict:
                time.sleep(random.uniform(0, 0.005 * (attempt + 1)))
        raise StoreBusy(f"{self.folder}/{name} kept changing under other writers; try again.")


# ---- calls waiting on a store: a reader need not wait for its own when another hangs -------
_asked_lock = threading.Lock()
_asked: dict[int, tuple[tuple[str, str], float]] = {}  # call -> (store, monotonic start)


def _store(remote: Remote) -> tuple[str, str]:
    """The store a location is on (its bucket and endpoint): its tenants and folders share it."""
    return remote.uri.split("/", 3)[2], dict(remote.options).get("endpoint", "")


@contextlib.contextmanager
def _asking(remote: Remote) -> Iterator[None]:
    call = object()
    with _asked_lock:
        _asked[id(call)] = (_store(remote), time.monotonic())
    try:
        yield
    finally:
        with _asked_lock:
            del _asked[id(call)]


def hung(remote: Remote, after: float) -> bool:
    """Whether a call of this process to `remote`'s store has waited over `after` seconds for
    its answer: a reader that would wait for one of its own serves what it holds instead."""
    store, now = _store(remote), time.monotonic()
    with _asked_lock:
        return any(s == store and now - began > after for s, began in _asked.values())


def _unreachable(doing: str, remote: Remote, exc: BaseException) -> StoreUnreachable:
    return StoreUnreachable(f"cannot {doing} {remote.uri}: {describe(exc)}")


# ---- the client (this module is the one that imports obstore) ----------------------------
# the HTTP client's options go to obstore's client options, the rest to its store
_CLIENT_KEYS = {
    "allow_http",
    "allow_invalid_certificates",
    "connect_timeout",
    "timeout",
    "proxy_url",
    "pool_idle_timeout",
    "user_agent",
}
_LANCE_ONLY = {"client_max_retries", "client_retry_timeout"}  # LanceDB's own retry options
_RETRIES = {"max_retries": 1, "retry_timeout": timedelta(seconds=5)}  # as remote.DEFAULTS
_clients_lock = threading.Lock()
_clients: dict[Remote, Any] = {}


def objects(remote: Remote) -> Any:
    """The obstore store rooted at `remote` (one per location and process)."""
    from obstore import store

    make: Any = store.from_url  # its overloads are per scheme; ours is chosen at run time
    with _clients_lock:
        found = _clients.get(remote)
        if found is None:
            opts = dict(remote.options)
            client: dict[str, Any] = {k: v for k, v in opts.items() if k in _CLIENT_KEYS}
            config = {k: v for k, v in opts.items() if k not in _CLIENT_KEYS | _LANCE_ONLY}
            if "allow_http" in client:
                client["allow_http"] = client["allow_http"] == "true"
            found = make(
                remote.uri + "/",
                config=config or None,
                client_options=client or None,
                retry_config=_RETRIES,
            )
            _clients[remote] = found
        return found


# ---- reaching a location, and marking a cache as its cache -------------------------------
def check(remote: Remote) -> None:
    """One LIST: raises StoreError in one line when the store cannot be reached."""
    try:
        Blobs(remote, "snapshot").names()
    except StoreError as exc:
        raise StoreError(f"cannot reach {remote.uri}: {str(exc).split(': ', 1)[-1]}") from None


def attach(cache: Path, remote: Remote) -> None:
    """Check the store can be reached, then mark `cache` as its cache (for every process,
    CLI commands and hooks included, that is pointed at the cache directory)."""
    check(remote)
    cache.mkdir(parents=True, exist_ok=True)
    marker = cache / MARKER
    text = json.dumps({"uri": remote.uri, "options": remote.public()}, indent=1, sort_keys=True)
    try:
        same = marker.read_text(encoding="utf-8") == text
    except OSError:
        same = False
    if not same:
        write_atomic(marker, text)
    attached[cache.resolve()] = remote
