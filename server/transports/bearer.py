"""`serve` over HTTP or SSE is never open by default (issue 53): every local user can reach
127.0.0.1, so without `--token` or `--tokens-file` the server uses a bearer token of its own,
made once and kept in the data directory (`DataDir.serve_token`, 0600) so that a client set up
with it keeps working after a restart. `--no-token` serves without one, deliberately (on a
loopback address only: `serve` refuses any other address without tokens)."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
from pathlib import Path

from dreamwell.server.config import Settings
from dreamwell.stores import DataDir, StoreError

logger = logging.getLogger(__name__)

TOKEN_BYTES = 32  # secrets.token_urlsafe: 43 characters
_LONGEST = 4096  # a kept token longer than this is not one we made
_SHORTEST = 8  # as Settings requires of --token


def with_token(settings: Settings) -> tuple[Settings, str | None]:
    """`settings` as `serve` runs them, and the one line it says about its token (None: the
    user gave tokens, or stdio). Raises StoreError (one line) when the kept token cannot be
    read or made."""
    if settings.transport == "stdio" or settings.tenant_tokens():
        return settings, None
    if settings.no_token:
        return settings, (
            "dreamwell serve: --no-token: every local user of this machine can read, change "
            "and delete your memories through this server"
        )
    path = DataDir(settings.data_dir).serve_token
    token = kept_token(path)
    line = (
        f"dreamwell serve: clients must send 'Authorization: Bearer <token>' with the token "
        f"kept in {path} (yours only; --token sets your own)"
    )
    return settings.model_copy(update={"token": token}), line


def kept_token(path: Path) -> str:
    """The token kept at `path`, made (random, 0600) if there is none. Two servers starting
    at once agree on one: the file is linked into place only if absent, then read back."""
    found = _read(path)
    if found is not None:
        return found
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.unlink(missing_ok=True)  # left by a process that died here
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with open(fd, "w", encoding="ascii") as out:
            out.write(secrets.token_urlsafe(TOKEN_BYTES) + "\n")
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another server made it first: theirs
            os.link(tmp, path)
    except OSError as exc:
        raise StoreError(
            f"cannot keep a bearer token in {path} ({exc.strerror}); give one with --token"
        ) from exc
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    made = _read(path)
    if made is None:
        raise StoreError(f"cannot read back the bearer token kept in {path}; give --token")
    return made


def _read(path: Path) -> str | None:
    """The token at `path`; None when there is none, or when the file was readable by other
    users or is not a token (then it is removed, and a new one is made: say so). A path that
    is not the user's own regular file is refused, never read or replaced."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    refuse = f"{path} must be a regular file of yours holding serve's bearer token"
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a symbolic link (ELOOP), unreadable, …
        raise StoreError(f"{refuse} ({exc.strerror}); remove it or give --token") from exc
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid():
            raise StoreError(f"{refuse}; remove it or give --token")
        text = os.read(fd, _LONGEST + 1)
    finally:
        os.close(fd)
    token = text.decode("ascii", "replace").strip()
    exposed = bool(found.st_mode & 0o077)
    if not exposed and _SHORTEST <= len(token) <= _LONGEST and _printable(token):
        return token
    why = "was readable by other users" if exposed else "held no token"
    logger.warning("%s %s: made a new bearer token (clients need the new one)", path, why)
    path.unlink(missing_ok=True)
    return None


def _printable(token: str) -> bool:
    return token.isprintable() and " " not in token
