"""Reading skills from a folder, a tree of folders or a .zip, and writing them as folders.

Everything is read and validated before anything is written: a bad file anywhere refuses the
whole import. Limits: MAX_FILE_BYTES per file, MAX_SKILL_BYTES and MAX_FILES per skill; a path
must be relative, without `..`, and a symlink must stay inside its skill's folder.

A file's mode travels as one bit, executable or not (`file_mode`): read from the folder or the
zip's Unix mode, written back as the file's read bits made executable; never setuid, setgid or
sticky, never writable by group or others.
"""

from __future__ import annotations

import os
import stat
import zipfile
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path, PurePosixPath

from dreamwell.stores.errors import InvalidInput
from dreamwell.stores.skills.skill_md import (
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_SKILL_BYTES,
    SKILL_MD,
    InvalidSkill,
    SkillFolder,
    parse_skill_md,
    strip_bookkeeping,
)

MAX_DEPTH = 6  # how deep a tree is searched for SKILL.md files
_SKIPPED = {".DS_Store", "Thumbs.db", "__pycache__", ".git"}


def check_path(path: str, where: str) -> str:
    """A file's path inside its skill: relative, POSIX, no `..`, no empty or control parts."""
    pure = PurePosixPath(path)
    bad = (
        not path
        or path.startswith("/")
        or "\\" in path
        or any(p in ("", ".", "..") for p in path.split("/"))
        or not all(ch >= " " for ch in path)
    )
    if bad or pure.is_absolute():
        raise InvalidSkill(
            where, f"file path {path!r} must be relative and inside the skill", "path"
        )
    return path


def is_executable(mode: int) -> bool:
    """Whether a file of this mode is kept as executable (its owner may execute it)."""
    return bool(mode & stat.S_IXUSR)


def file_mode(mode: int, executable: bool) -> int:
    """The permission bits a written file gets from its present `mode`: setuid, setgid,
    sticky and group/other write dropped, execute set where read is (or cleared)."""
    bits = stat.S_IMODE(mode) & 0o755
    return bits | (bits & 0o444) >> 2 if executable else bits & ~0o111


def make_folder(
    name: str | None,
    files: Mapping[str, bytes],
    where: str,
    executable: Iterable[str] = (),
) -> SkillFolder:
    """Validate a skill's files (`name`: the folder's name, None when there is none, as for
    a skill written by the dream or the browser) into a SkillFolder; `executable`: the paths
    among `files` that are executable (others are ignored)."""
    if SKILL_MD not in files:
        raise InvalidSkill(where, "a skill folder needs a SKILL.md", "skill-md-required")
    if len(files) > MAX_FILES:
        raise InvalidSkill(where, f"{len(files)} files; at most {MAX_FILES}", "file-count")
    total = 0
    for path, data in files.items():
        check_path(path, where)
        if len(data) > MAX_FILE_BYTES:
            raise InvalidSkill(
                where, f"{path} is {len(data):,} bytes; at most {MAX_FILE_BYTES:,}", "file-size"
            )
        total += len(data)
    if total > MAX_SKILL_BYTES:
        raise InvalidSkill(
            where, f"{total:,} bytes in all; at most {MAX_SKILL_BYTES:,}", "skill-size"
        )
    try:
        text = files[SKILL_MD].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidSkill(where, "SKILL.md must be UTF-8 text", "skill-md-utf8") from exc
    stripped, bookkeeping = strip_bookkeeping(text)
    fm, body = parse_skill_md(stripped, where, name)
    kept = {**files, SKILL_MD: stripped.encode("utf-8")}
    runnable = frozenset(p for p in executable if p in files)
    return SkillFolder(str(fm["name"]), kept, fm, body, bookkeeping, runnable)


# ---- folders -------------------------------------------------------------------------------
def _read_file(path: Path, root: Path, rel: str, where: str) -> tuple[bytes, bool]:
    """The file's bytes and whether it is executable."""
    if path.is_symlink():
        target = path.resolve()
        if not target.is_relative_to(root.resolve()):
            raise InvalidSkill(where, f"{rel} is a symlink out of the skill folder", "symlink")
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise InvalidSkill(where, f"{rel} is not a regular file", "file-type")
    if info.st_size > MAX_FILE_BYTES:
        raise InvalidSkill(
            where, f"{rel} is {info.st_size:,} bytes; at most {MAX_FILE_BYTES:,}", "file-size"
        )
    with path.open("rb") as fh:
        return fh.read(MAX_FILE_BYTES + 1), is_executable(info.st_mode)


def read_folder(folder: Path) -> SkillFolder:
    """One skill folder (its name is the skill's name)."""
    where = f"skill folder {folder}"
    root = folder.resolve()
    files: dict[str, bytes] = {}
    executable: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        here = Path(dirpath)
        for sub in list(dirnames):
            link = here / sub
            if sub in _SKIPPED:
                dirnames.remove(sub)
            elif link.is_symlink():
                raise InvalidSkill(
                    where, f"{link.relative_to(folder)} is a symlinked folder", "symlink"
                )
        for name in filenames:
            if name in _SKIPPED:
                continue
            rel = (here / name).relative_to(folder).as_posix()
            files[rel], runnable = _read_file(here / name, root, rel, where)
            if runnable:
                executable.add(rel)
            if len(files) > MAX_FILES:
                raise InvalidSkill(where, f"more than {MAX_FILES} files", "file-count")
    return make_folder(folder.name, files, where, executable)


def _skill_dirs(top: Path) -> list[Path]:
    if (top / SKILL_MD).is_file():
        return [top]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        here = Path(dirpath)
        depth = len(here.relative_to(top).parts)
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED and depth < MAX_DEPTH)
        if SKILL_MD in filenames and here != top:
            found.append(here)
            dirnames[:] = []  # a skill's own files are not skills
    return found


# ---- zip -----------------------------------------------------------------------------------
def _zip_members(archive: zipfile.ZipFile, where: str) -> tuple[dict[str, bytes], set[str]]:
    """The archive's files and the paths whose Unix mode is executable."""
    members: dict[str, bytes] = {}
    executable: set[str] = set()
    total = 0
    for info in archive.infolist():
        if info.is_dir():
            continue
        check_path(info.filename, where)
        if stat.S_ISLNK(info.external_attr >> 16):
            raise InvalidSkill(where, f"{info.filename} is a symlink", "symlink")
        if info.file_size > MAX_FILE_BYTES:
            raise InvalidSkill(
                where,
                f"{info.filename} is {info.file_size:,} bytes; at most {MAX_FILE_BYTES:,}",
                "file-size",
            )
        with archive.open(info) as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise InvalidSkill(where, f"{info.filename} is too large", "file-size")
        total += len(data)
        if total > 8 * MAX_SKILL_BYTES:
            raise InvalidSkill(where, "the archive holds too much data", "skill-size")
        members[info.filename] = data
        if is_executable(info.external_attr >> 16):
            executable.add(info.filename)
    return members, executable


def read_zip(path: Path) -> list[SkillFolder]:
    """Skills in a .zip: one folder at its root (Claude.ai's upload shape), several, or
    a SKILL.md at its root (named by the archive)."""
    where = f"archive {path.name}"
    try:
        with zipfile.ZipFile(path) as archive:
            members, executable = _zip_members(archive, where)
    except (zipfile.BadZipFile, OSError, RuntimeError, EOFError) as exc:
        raise InvalidInput(f"{where}: not a readable zip file ({exc})") from exc
    if SKILL_MD in members:
        return [make_folder(path.stem, members, where, executable)]
    roots = sorted(p.rsplit("/", 1)[0] for p in members if p.endswith("/" + SKILL_MD))
    roots = [r for r in roots if not any(r.startswith(o + "/") for o in roots if o != r)]
    out = []
    for root in roots:
        files = {p[len(root) + 1 :]: d for p, d in members.items() if p.startswith(root + "/")}
        runnable = {p[len(root) + 1 :] for p in executable if p.startswith(root + "/")}
        out.append(make_folder(root.rsplit("/", 1)[-1], files, f"{where}: {root}", runnable))
    return out


def read_skills(path: Path) -> list[SkillFolder]:
    """Every skill at `path`: a skill folder, a tree of them, or a .zip; refuses the whole
    lot (InvalidInput) on the first bad one, and when there is none."""
    if not path.exists():
        raise InvalidInput(f"{path} does not exist")
    if path.is_file():
        if not zipfile.is_zipfile(path):
            raise InvalidInput(f"{path} is neither a skill folder, a tree of them, nor a .zip")
        skills = read_zip(path)
    else:
        skills = [read_folder(d) for d in _skill_dirs(path)]
    if not skills:
        raise InvalidInput(f"no SKILL.md found under {path}")
    names = [s.name for s in skills]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InvalidInput(f"{path}: more than one skill named {', '.join(twice)}")
    return skills


def write_folder(
    dest: Path, name: str, files: Mapping[str, bytes], executable: Collection[str] = ()
) -> Path:
    """Write one skill as `dest/<name>/…` (replacing files of the same paths), the paths in
    `executable` executable and the others not (`file_mode`)."""
    folder = dest / name
    for rel, data in sorted(files.items()):
        target = folder / check_path(rel, f"skill {name}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)  # through a symlink or into a device, as the user made it
        mode = target.stat().st_mode
        if stat.S_ISREG(mode):  # never chmod a device (`chmod /dev/null` as root: the machine's)
            target.chmod(file_mode(mode, rel in executable))
    return folder
