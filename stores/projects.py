"""Projects (docs/projects.md): which repository a directory belongs to, read from `.git` on disk.

A project is keyed by its repository's normalised remote URL (`origin`, else the first remote:
the https and ssh forms of one repository are one key, so clones elsewhere and teammates'
clones share it), else by the repository's top-level path (the main working tree's, so the
worktrees of one repository are one project). Its name is its folder's name and its root the
top-level directory of the working tree the directory is in (where a client keeps
`.claude/skills/`). A directory outside any repository — or in a repository whose top is the
home directory or `/` (a dotfiles repository) — is no project.

Nothing here runs `git`: `.git` is read directly (a `.git` directory; a `.git` file saying
`gitdir: …`, as worktrees and submodules have, with a worktree's config in the common
directory named by `commondir`), and each directory's answer is cached. A repository is
untrusted input: only regular files are read there, at most MAX_GIT_FILE bytes of each (a FIFO
or a link to `/dev/zero` is skipped, never waited on), and a remote URL that cannot be parsed
makes the directory no project, said once in the log, instead of failing. Which memories
belong to a project and which are global (`is_global`, `PROJECT`) is decided here too.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from dreamwell.stores.model import PROJECT, PROJECT_NAME, MemoryEntry

# categories whose memories follow the user into every project (plus `global_categories`)
GLOBAL_CATEGORIES = ("user-preferences", "preferences", "anti-patterns", "people")
_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>(?!//).*)$")  # git@host:owner/repo
_SECTION = re.compile(r'^\[\s*remote\s+"(?P<name>[^"]*)"\s*\]')
_CACHED = 512
MAX_GIT_FILE = 1024 * 1024  # a git config is a few KiB; anything past this is not read

logger = logging.getLogger(__name__)

__all__ = [
    "GLOBAL_CATEGORIES",
    "PROJECT",
    "PROJECT_NAME",
    "Project",
    "entry_project",
    "forget_projects",
    "is_global",
    "normalise_remote",
    "pinned_project",
    "project_of",
    "project_of_uri",
]


@dataclass(frozen=True)
class Project:
    key: str  # the normalised remote URL, else the repository's top-level path
    name: str  # the folder's name, for people
    root: Path  # the working tree's top-level directory


def normalise_remote(url: str) -> str:
    """`host/owner/repo` for any spelling of one remote: scheme, user and password, port and
    `.git` dropped, host lowercased (`git@github.com:a/b.git`, `https://github.com/a/b` and
    `ssh://git@github.com/a/b` are all `github.com/a/b`). A local path stays a path."""
    url = url.strip()
    if "://" in url:
        parts = urlsplit(url)
        host, path = (parts.hostname or "").lower(), parts.path
        if parts.scheme == "file" or not host:
            host = ""
    elif (scp := _SCP.match(url)) and not re.match(r"^[A-Za-z]:[\\/]", url):
        host, path = scp["host"].lower(), scp["path"]
    else:
        host, path = "", url
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4].rstrip("/")
    return f"{host}/{path}" if host else "/" + path


def read_git_file(path: Path) -> str | None:
    """The text of a small regular file in a repository; None when it is missing, not a
    regular file (a FIFO is opened without waiting for a writer, a device never read) or
    unreadable. At most MAX_GIT_FILE bytes are read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            logger.warning("%s is not a regular file; it is not read", path)
            return None
        return os.read(fd, MAX_GIT_FILE).decode("utf-8", errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _git_dir(top: Path) -> Path | None:
    """The git directory of a working tree whose top is `top`, if it has one."""
    dot = top / ".git"
    if dot.is_dir():
        return dot
    if dot.is_file():
        line = (read_git_file(dot) or "").strip()
        if line.startswith("gitdir:"):
            target = Path(line[len("gitdir:") :].strip())
            return target if target.is_absolute() else (top / target).resolve()
    return None


def _common_dir(git_dir: Path) -> Path:
    """Where a worktree's shared config lives (the git directory itself otherwise)."""
    common = (read_git_file(git_dir / "commondir") or "").strip()
    if not common:
        return git_dir
    path = Path(common)
    return path if path.is_absolute() else (git_dir / path).resolve()


def _remote_url(config: Path) -> str | None:
    """The url of remote `origin`, else of the first remote with one, in a git config file."""
    text = read_git_file(config)
    if text is None:
        return None
    urls: dict[str, str] = {}
    section: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            found = _SECTION.match(line)
            section = found["name"] if found else None
        elif section is not None and "=" in line and section not in urls:
            key, value = line.split("=", 1)
            if key.strip().lower() == "url" and value.strip():
                urls[section] = value.strip().strip('"')
    return urls.get("origin") or next(iter(urls.values()), None)


def _outside(top: Path) -> bool:
    """A repository at `/` or the home directory is no project: everything is under it."""
    try:
        home = Path.home().resolve()
    except (OSError, RuntimeError):  # no home directory known
        return top == Path(top.anchor)
    return top in (Path(top.anchor), home)


@functools.lru_cache(maxsize=_CACHED)
def _cached(directory: str) -> Project | None:
    start = Path(directory)
    for top in (start, *start.parents):
        git_dir = _git_dir(top)
        if git_dir is None:
            continue
        if _outside(top):
            return None
        common = _common_dir(git_dir)
        url = _remote_url(common / "config")
        # no remote: the main working tree's top, so a repository's worktrees share it
        main = common.parent if common.name == ".git" else top
        try:
            key = normalise_remote(url) if url else str(main)
        except ValueError as exc:  # `https://[bad/x`: urlsplit refuses it
            logger.warning("%s: remote URL %r cannot be read (%s); no project", top, url, exc)
            return None
        return Project(key, top.name, top)
    return None


def project_of(directory: str | os.PathLike[str] | None) -> Project | None:
    """The project `directory` is in, None outside any repository (or for None)."""
    if directory is None or not str(directory):
        return None
    try:
        resolved = Path(directory).expanduser().resolve()
    except (OSError, RuntimeError):
        return None
    return _cached(str(resolved))


def project_of_uri(uri: str) -> Project | None:
    """The project of a `file://` URI (an MCP root); None for any other scheme."""
    parts = urlsplit(uri)
    if parts.scheme != "file":
        return None
    from urllib.parse import unquote

    return project_of(unquote(parts.path))


def pinned_project(value: str) -> Project:
    """The `project` setting: a directory names its repository's project (or, outside any,
    itself); anything else is taken as a key as it is (a remote URL is normalised)."""
    path = Path(value).expanduser()
    if path.is_dir():
        found = project_of(path)
        if found is not None:
            return found
        resolved = path.resolve()
        return Project(str(resolved), resolved.name, resolved)
    try:
        key = normalise_remote(value) if "://" in value or _SCP.match(value) else value.strip()
    except ValueError:  # not a URL after all: the key is the value as it is
        key = value.strip()
    return Project(key, key.rstrip("/").rsplit("/", 1)[-1] or key, Path.cwd())


def is_global(category: str | None, extra: Iterable[str] = ()) -> bool:
    """Whether memories in `category` are global (under GLOBAL_CATEGORIES or `extra`, at a
    segment boundary) rather than the saving project's."""
    if not category:
        return False
    return any(category == c or category.startswith(c + "/") for c in (*GLOBAL_CATEGORIES, *extra))


def entry_project(entry: MemoryEntry) -> str | None:
    """The key of the project `entry` belongs to; None for a global memory."""
    return entry.metadata.get(PROJECT) or None


def forget_projects() -> None:
    """Drop the cached answers (after a repository's `.git` changed)."""
    _cached.cache_clear()
