"""The data directory's layout: every path, lock file and tenant lives here, nowhere else.

<root>/                      the root store (stdio, single token)
    format.json              {"format": N}: the layout version, written when absent
    .private                 present once every path below was made the user's own (0700
                             folders, 0600 files; `DataDir.ensure`)
    lancedb/                 durable long-term records and vectors
    index/                   the Tantivy index derived from them
    wal/<first-seq>.log      write-ahead log of long-term writes not yet checkpointed
    longterm.state           checkpoint position, LanceDB version, change journal
    write.lock               taken to append to the WAL
    checkpoint.lock          taken to fold the WAL into LanceDB and Tantivy
    working-memory/          one JSON file per top-level segment, and its lock
    conversation.jsonl …     input logs of the dream worker (their locks, and .<log>.dropped:
                             how many records their size bound dropped)
    dreams/<run>.json        dream reports; dream.lock; .activity (tool traffic marker);
                             .last-dream (touched when a cycle ends); .auto-dream.lock and
                             .auto-dream.started (the dream that starts by itself)
    skills/<name>.json       skills (stores/skills/catalog.py); skills/.generation; skills.lock
    skill-usage.jsonl        uses of skills (bounded)
    skills-sync.json         the skills kept as folders a client loads (~/.claude/skills/),
                             what dreamwell wrote there and the clashes; .skills-sync.lock
    enrich.lock, backfill.lock  held by the one process doing that background work
    .import-progress.json    how far a running `dreamwell import` got, while it holds
                             .import.lock (stores/progress.py)
    hooks/<session>.json     client hooks' state per client session; hooks.log their log
    hooks/entries.sqlite     the memories' text for hooks, which never open LanceDB
    serve-token              the bearer token `serve --transport http|sse` made for itself
                             when none was given (0600; server/transports/bearer.py)
    tenants/<name>/          a tenant: the same layout again
    remote.json              present when this directory caches an object-store location
                             (`stores/remote/location.py`): the log is then kept there, not in wal/,
                             and the skills (stores/skills/object_storage.py; skills/ holds copies)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dreamwell.stores.errors import StoreError
from dreamwell.stores.files import make_private, write_atomic
from dreamwell.stores.model import TENANT_RE, check_tenant
from dreamwell.stores.remote.location import Remote
from dreamwell.stores.remote.location import of as remote_of

FORMAT = 2  # 1: v0.1 (one LanceDB version per write); 2: write-ahead log + checkpoints
_SAFE_SESSION = re.compile(r"[A-Za-z0-9_-]{1,80}")
logger = logging.getLogger(__name__)


def newer_format(root: Path, found: int) -> str:
    return (
        f"{root} holds data format {found}, newer than this dreamwell reads ({FORMAT}); "
        "upgrade it: pipx upgrade dreamwell (or pip install -U dreamwell)"
    )


@dataclass(frozen=True)
class DataDir:
    root: Path

    # ---- long-term store --------------------------------------------------------------
    @property
    def lancedb(self) -> Path:
        return self.root / "lancedb"

    @property
    def index(self) -> Path:
        return self.root / "index"

    @property
    def wal(self) -> Path:
        return self.root / "wal"

    @property
    def state(self) -> Path:
        return self.root / "longterm.state"

    @property
    def write_lock(self) -> Path:
        return self.root / "write.lock"

    @property
    def checkpoint_lock(self) -> Path:
        return self.root / "checkpoint.lock"

    @property
    def damaged(self) -> Path:
        """Where unreadable LanceDB data files are moved, with a report of what was lost."""
        return self.root / "damaged"

    @property
    def lance_sums(self) -> Path:
        """Size and CRC-32 of each LanceDB data file, recorded when it was written."""
        return self.root / "lancedb.sums.json"

    @property
    def snapshot(self) -> Path:
        """The records at a checkpoint (gzip JSON lines): with the log, a copy without LanceDB."""
        return self.root / "longterm.snapshot.gz"

    @property
    def remote(self) -> Remote | None:
        """The object-store location this directory caches (`remote.json`), None if local."""
        return remote_of(self.root)

    # ---- working memory, logs, dream ----------------------------------------------------
    @property
    def working(self) -> Path:
        return self.root / "working-memory"

    def log(self, name: str) -> Path:
        return self.root / name

    def log_lock(self, name: str) -> Path:
        return self.root / f".{name}.lock"

    def log_dropped(self, name: str) -> Path:
        """How many records the log's size bound dropped, all told (`dreamwell stats`)."""
        return self.root / f".{name}.dropped"

    @property
    def last_dream(self) -> Path:
        """Touched when a dream cycle (not a preview) ends: its time is the last cycle's."""
        return self.root / ".last-dream"

    @property
    def auto_dream_lock(self) -> Path:
        """Taken, without waiting, by whoever decides whether to start a dream by itself."""
        return self.root / ".auto-dream.lock"

    @property
    def auto_dream_started(self) -> Path:
        """Written when a dream was started by itself: its pid, its time (the mtime)."""
        return self.root / ".auto-dream.started"

    @property
    def dream_backoff(self) -> Path:
        """Failed dream cycles in a row, and the last one's cause: the dream that starts by
        itself waits longer after each (dream/backoff.py)."""
        return self.root / ".dream-backoff.json"

    @property
    def reports(self) -> Path:
        return self.root / "dreams"

    @property
    def dream_lock(self) -> Path:
        return self.root / "dream.lock"

    @property
    def enrich_lock(self) -> Path:
        """Held by the one process enriching this store's queued memories."""
        return self.root / "enrich.lock"

    @property
    def backfill_lock(self) -> Path:
        """Held by the one process embedding this store's memories that have no vector."""
        return self.root / "backfill.lock"

    @property
    def import_progress(self) -> Path:
        """How far the running import got ({"done", "total", ...}), for the browser."""
        return self.root / ".import-progress.json"

    @property
    def import_lock(self) -> Path:
        """Held by the import that writes `import_progress`: free, its marker is stale."""
        return self.root / ".import.lock"

    @property
    def activity(self) -> Path:
        return self.root / ".activity"

    @property
    def serve_token(self) -> Path:
        return self.root / "serve-token"

    @property
    def format_file(self) -> Path:
        return self.root / "format.json"

    @property
    def private_marker(self) -> Path:
        """Present once every path in this directory was made the user's own (`ensure`)."""
        return self.root / ".private"

    # ---- skills (docs/data-directory.md) ----------------------------------------------------
    @property
    def skills(self) -> Path:
        """One `<name>.json` record per skill."""
        return self.root / "skills"

    @property
    def skills_lock(self) -> Path:
        return self.root / "skills.lock"

    @property
    def skills_generation(self) -> Path:
        """An integer bumped by every skills write; servers watch it."""
        return self.skills / ".generation"

    @property
    def skills_sync(self) -> Path:
        """Where the skills are kept as client folders, and what was written there."""
        return self.root / "skills-sync.json"

    @property
    def skills_sync_lock(self) -> Path:
        return self.root / ".skills-sync.lock"

    @property
    def skill_usage(self) -> str:
        """The usage log's name (a JsonlLog in this directory)."""
        return "skill-usage.jsonl"

    @property
    def mcp_lists(self) -> Path:
        """The MCP server's last answers to the list requests (tools, prompts, resources),
        which the next stdio server answers from while it loads."""
        return self.root / "mcp-lists.json"

    # ---- client hooks (`dreamwell hook`) ------------------------------------------------
    @property
    def hooks(self) -> Path:
        return self.root / "hooks"

    def hook_session(self, session_id: str) -> Path:
        """The state file of one client session: its id when that is a safe file name, else
        a hash of it."""
        if not _SAFE_SESSION.fullmatch(session_id):
            session_id = hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:32]
        return self.hooks / f"{session_id}.json"

    @property
    def hooks_log(self) -> Path:
        return self.root / "hooks.log"

    @property
    def hook_door(self) -> Path:
        """An earlier version's HTTP hook door (port, token): deleted (server/cli/old_hooks.py)."""
        return self.root / "hook-door.json"

    @property
    def hook_entries(self) -> Path:
        """The memories' text as the hooks read it (a snapshot, refreshed in the background)."""
        return self.hooks / "entries.sqlite"

    @property
    def hook_refresh_lock(self) -> Path:
        return self.hooks / ".refresh.lock"

    @property
    def hook_refresh_failed(self) -> Path:
        """Present for a while after a refresher failed (hooks then do not start another)."""
        return self.hooks / ".refresh.failed"

    @property
    def hook_refresh_pid(self) -> Path:
        """The process ids of the refreshers hooks started (one a line, newest last)."""
        return self.hooks / ".refresh.pid"

    # ---- tenants ----------------------------------------------------------------------------
    def tenant(self, name: str) -> DataDir:
        """`""` is this directory itself; any other name is `tenants/<name>`."""
        return self if name == "" else DataDir(self.root / "tenants" / check_tenant(name))

    def tenants(self) -> Iterator[str]:
        """Names of the tenants that exist under this directory (not the root itself)."""
        folder = self.root / "tenants"
        children = sorted(folder.iterdir()) if folder.is_dir() else []
        yield from (c.name for c in children if c.is_dir() and TENANT_RE.fullmatch(c.name))

    # ---- format -------------------------------------------------------------------------------
    def ensure(self, walk: bool = True) -> None:
        """Create the directory and record the layout version when it is new; refuse a
        directory written by a newer dreamwell. Make it private (`make_private`; without
        `walk`, only the directory itself now, which already shuts others out: the walk is
        left to the store's opening, after a server's handshake)."""
        problem = self.unusable()
        if problem is not None:
            raise StoreError(problem)
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.make_private(walk)
            if not self.format_file.exists():
                write_atomic(self.format_file, json.dumps({"format": FORMAT}))
        except OSError as exc:
            if not self.root.is_dir():
                raise StoreError(
                    f"cannot create the data directory {self.root}: {exc.strerror}. "
                    "Choose another with --data-dir."
                ) from exc
            # a read-only directory still serves reads

    def make_private(self, walk: bool = True) -> int:
        """Make this directory the user's alone (folders 0700, files 0600), once (then two
        stat() calls); one line says how many paths were tightened, and returns it. Without
        `walk`, only the directory itself is made 0700, silently."""
        try:
            mode = self.root.stat().st_mode
        except OSError:
            return 0
        if not mode & 0o077 and self.private_marker.exists():
            return 0
        if _home_or_above(self.root):
            return 0  # --data-dir pointed at a home folder (or above): not ours to change
        if not walk:
            with contextlib.suppress(OSError):
                self.root.chmod(stat.S_IMODE(mode) & 0o700)
            return 0
        changed = make_private(self.root)
        with contextlib.suppress(OSError):  # read-only: checked again next time
            os.close(os.open(self.private_marker, os.O_WRONLY | os.O_CREAT, 0o600))
        if changed:
            logger.warning(
                "made %d paths in the data directory %s readable by this user only (folders "
                "0700, files 0600): other local users could read them",
                changed,
                self.root,
            )
        return changed

    def unusable(self) -> str | None:
        """Why this directory cannot hold a store (unreadable, a file, written by a newer
        dreamwell), in a sentence that says what to do; None when it can (or does not exist
        yet: it is created)."""
        try:
            with os.scandir(self.root) as entries:
                next(entries, None)
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            return (
                f"the data directory {self.root} is a file, not a directory; choose a directory "
                "with --data-dir (or DREAMWELL_DATA_DIR)"
            )
        except PermissionError as exc:
            return (
                f"the data directory {self.root} cannot be read by this user ({exc.strerror}); "
                f"give it back (chown -R $USER {self.root}) or choose another with --data-dir"
            )
        except OSError as exc:
            return f"the data directory {self.root} cannot be read ({exc.strerror}); check the disk"
        found = self.format()
        return newer_format(self.root, found) if found is not None and found > FORMAT else None

    def format(self) -> int | None:
        """The recorded layout version (None: not recorded, e.g. made by v0.1)."""
        try:
            return int(json.loads(self.format_file.read_text(encoding="utf-8"))["format"])
        except (OSError, ValueError, KeyError, TypeError):
            return None


def _home_or_above(root: Path) -> bool:
    """Whether `root` is the user's home folder or one above it."""
    try:
        home = Path.home().resolve()
        return root.resolve() in (home, *home.parents)
    except (OSError, RuntimeError):
        return False
