"""The hooks' snapshot of the memories' text (`hooks/entries.sqlite`), rebuilt in a background
process that a hook starts when its snapshot is missing or behind the store: opening the store
takes LanceDB's seconds, which the hook itself must never wait for. One refresher at a time
(a lock taken without waiting); it exits when the snapshot is written.

    python -m dreamwell.server.hooks.refresh DATA_DIR
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

from dreamwell.server.detached import start_detached
from dreamwell.stores import DataDir

RETRY_AFTER = 60.0  # seconds after a failed refresh before a hook starts another


def start_refresh(dirs: DataDir) -> None:
    """Start a detached refresher (it gives up at once if another one is running), unless
    one failed within the last minute: a store that cannot be opened must not cost every
    prompt a process that imports LanceDB to fail again."""
    try:
        if time.time() - dirs.hook_refresh_failed.stat().st_mtime < RETRY_AFTER:
            return
    except FileNotFoundError:
        pass
    dirs.hooks.mkdir(parents=True, exist_ok=True)
    pid = start_detached([sys.executable, "-m", "dreamwell.server.hooks.refresh", str(dirs.root)])
    pids = dirs.hook_refresh_pid
    mode = "a" if pids.exists() and pids.stat().st_size < 4096 else "w"
    with open(pids, mode, encoding="utf-8") as fh:  # for whoever waits for them (tests)
        fh.write(f"{pid}\n")


def refresh(dirs: DataDir) -> bool:
    """Rebuild the snapshot now; False when another refresher holds the lock."""
    from dreamwell.stores import claimed

    dirs.hooks.mkdir(parents=True, exist_ok=True)
    with claimed(dirs.hook_refresh_lock) as mine:
        if not mine:  # another refresher is at it: no need to import LanceDB here
            return False
        from dreamwell.stores import LongTermStore
        from dreamwell.stores.hooks import write_snapshot
        from dreamwell.stores.longterm import StateFile

        state = StateFile(dirs.state).read()
        seq = state.checkpoint if state.known else 0  # a lower bound of what the store holds
        store = LongTermStore(dirs.root)
        write_snapshot(dirs, store.entries(), seq)
        dirs.hook_refresh_failed.unlink(missing_ok=True)
    return True


def main(argv: list[str]) -> int:
    from dreamwell.stores.hooks import hooks_log

    dirs = DataDir(Path(argv[0]))
    try:
        refresh(dirs)
    except Exception as exc:  # a background helper: what went wrong goes to hooks.log
        hooks_log(dirs, f"refresh failed: {type(exc).__name__}: {exc}")
        with contextlib.suppress(OSError):
            dirs.hook_refresh_failed.touch()
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
