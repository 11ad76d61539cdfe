"""Where dream reports (and the undo data in them) are kept: `dreams/<run>.json` files in the
data directory, or `dreams/<run>.json` objects in the object store when the data directory
caches one, so that `dreamwell dream --report/--undo` and the browser work on any replica.

The dream layer owns what a report says; this module only stores whole documents by run
name: `names()` (newest first), `read(run) -> (bytes, version)`, and `write(run, data,
expect)`. On the object store `expect` is the version read (`If-Match`): undo claims a
report that way, so of two replicas undoing one run at once exactly one does. Local files
are written as before (tmp + fsync + rename; `expect` is not checked).
"""

from __future__ import annotations

import re
from pathlib import Path

from dreamwell.stores.errors import StoreError
from dreamwell.stores.files import write_atomic
from dreamwell.stores.layout import DataDir

_RUN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


class ReportChanged(StoreError):
    """The report was changed by another process since it was read: nothing was written."""


class DreamReports:
    def __init__(self, data_dir: Path) -> None:
        dirs = DataDir(data_dir)
        self.folder = dirs.reports
        remote = dirs.remote
        self._blobs = None
        if remote is not None:
            from dreamwell.stores.remote.blobs import Blobs

            self._blobs = Blobs(remote, dirs.reports.name)

    def names(self) -> list[str]:
        """Every run with a report, newest first."""
        if self._blobs is not None:
            found = (n.removesuffix(".json") for n in self._blobs.names() if n.endswith(".json"))
            runs = [n for n in found if _RUN.fullmatch(n)]
        elif self.folder.is_dir():
            runs = [p.stem for p in self.folder.glob("*.json")]
        else:
            runs = []
        return sorted(runs, reverse=True)

    def read(self, run: str) -> tuple[bytes, str]:
        """The report's bytes and version; KeyError when there is none."""
        if not _RUN.fullmatch(run):
            raise KeyError(run)
        if self._blobs is not None:
            found = self._blobs.read(f"{run}.json")
            if found is None:
                raise KeyError(run)
            return found
        path = self.folder / f"{run}.json"
        try:
            st = path.stat()
            return path.read_bytes(), f"{st.st_mtime_ns}-{st.st_size}"
        except FileNotFoundError:
            raise KeyError(run) from None

    def write(self, run: str, data: bytes, expect: str | None = None) -> str:
        """Store the report; with `expect` (object store) only over exactly that version,
        else ReportChanged. Returns the new version."""
        if not _RUN.fullmatch(run):
            raise ValueError(f"bad dream run name {run!r}")
        if self._blobs is not None:
            from dreamwell.stores.remote.blobs import Conflict

            try:
                return self._blobs.write(f"{run}.json", data, expect)
            except Conflict as exc:
                raise ReportChanged(f"dream report {run} was changed meanwhile") from exc
        self.folder.mkdir(exist_ok=True)
        path = self.folder / f"{run}.json"
        write_atomic(path, data.decode("utf-8"))
        return ""

    def where(self, run: str) -> str:
        if self._blobs is not None:
            return f"{self._blobs.remote.uri}/{self._blobs.folder}/{run}.json"
        return str(self.folder / f"{run}.json")
