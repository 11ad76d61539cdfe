"""How a `dreamwell` command ends: one exit-code convention for every command (0 done, 1 the
operation failed, 2 a usage error, 130 interrupted; docs/reference.md "Exit codes") and one
line on stderr for whatever went wrong, never a traceback. `run_command` is the one place
errors become codes. Standard library only (the console script imports it lazily)."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from pathlib import Path
    from typing import TypeAlias

    from dreamwell.server.config import Settings
    from dreamwell.server.transports.early import EarlyStdio

    Command: TypeAlias = Callable[[Settings, argparse.Namespace], int]
    Early: TypeAlias = EarlyStdio | None


def fail(message: str, code: int = 1) -> int:
    """One line on stderr that says what was wrong and what to do."""
    sys.stderr.write(f"dreamwell: {message}\n")
    return code


def refuse(early: Early, message: str, code: int = 1) -> int:
    """`fail`, and a server that cannot start tells its client why (instead of leaving it
    with a closed connection)."""
    fail(message, code)
    if early is not None:
        early.refuse(message)
    return code


def unreadable(exc: PermissionError, data_dir: Path) -> str:
    """One line for a file this user may not read or write, naming it and the way out."""
    where = exc.filename or data_dir
    return (
        f"cannot read or write {where} ({exc.strerror}); give this user access to the data "
        f"directory (chown -R $USER {data_dir}) or choose another with --data-dir"
    )


# Exit codes, the same for every command (docs/reference.md "Exit codes"): 0 done, 1 the
# operation failed (said in one line), 2 a usage error (a flag, argument or setting that
# cannot be used), 130 interrupted (Ctrl-C). `dreamwell hook` always exits 0.
FAILED, USAGE, INTERRUPTED = 1, 2, 130
# commands that open the data directory: one that cannot hold a store is one line, first
OPENS_STORE = frozenset({"dream", "log", "export", "import", "stats", "reindex", "skills", "ui"})


def run_command(
    run: Command, command: str, settings: Settings, args: argparse.Namespace, early: Early
) -> int:
    """Run `command` (`run`: its function); whatever goes wrong is one line on stderr and its
    exit code, never a traceback (a defect of ours aside)."""
    try:
        if command in OPENS_STORE:
            from dreamwell.stores import DataDir

            problem = DataDir(settings.data_dir).unusable()
            if problem is not None:
                return fail(problem, FAILED)
        return run(settings, args)
    except KeyboardInterrupt:  # Ctrl-C: one line, the shell's status for SIGINT
        return fail("interrupted (Ctrl-C)", INTERRUPTED)
    except BrokenPipeError:  # `dreamwell export | head`: the reader left; nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except ValueError as exc:  # bad tenant names and the like, already worded for people
        return refuse(early, str(exc), USAGE)
    except PermissionError as exc:  # e.g. a data directory another user owns
        return refuse(early, unreadable(exc, settings.data_dir))
    except OSError as exc:  # a path that cannot be used: a directory for a file, a full disk
        return refuse(early, os_failure(exc))
    except Exception as exc:
        from dreamwell.stores import StoreError  # loaded already if a store was opened

        if not isinstance(exc, StoreError):
            raise
        return refuse(early, str(exc))  # e.g. the write lock held too long: try again


def os_failure(exc: OSError) -> str:
    """One line for a file or directory that could not be used, naming it."""
    if exc.filename is None and exc.args and isinstance(exc.args[0], str):
        return str(exc.args[0])  # already worded (stores.NotWritable)
    where = f" {exc.filename}" if exc.filename else ""
    return f"cannot use{where}: {exc.strerror or exc}; check the path, its permissions and the disk"
