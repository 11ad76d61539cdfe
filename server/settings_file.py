"""The settings file: `$XDG_CONFIG_HOME/dreamwell/config.toml` (`~/.config/dreamwell/config.toml`),
one per user, of top-level `name = value` lines named as the settings (README's table).
Flags beat environment variables, which beat this file, which beats the defaults.

Standard library only (tomllib, imported only when the file exists): the stdio server's early
reader (where.py) and the hooks' reader (hooks/settings.py) read it as well as config.py.
Reading never raises: a file that cannot be read or parsed is ignored and said in `problems`.
`set_value` (`dreamwell config set`) edits one line, keeping the others and their comments."""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # `typing` costs the early reader ~18 ms: only for the type checker
if TYPE_CHECKING:
    from typing import Any

NAME = "config.toml"


def path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "dreamwell", NAME)


class FileSettings:
    """What the file holds: `values` (name -> the TOML value: str, int, float or bool) and
    `problems` (each one line: what is wrong and that it is ignored)."""

    __slots__ = ("path", "problems", "values")

    def __init__(self, path: str, values: dict[str, Any], problems: tuple[str, ...]) -> None:
        self.path, self.values, self.problems = path, values, problems


def read() -> FileSettings:
    """The file's top-level values; a missing file is empty, a broken one ignored (said)."""
    where = path()
    try:
        mode = os.stat(where).st_mode
    except (FileNotFoundError, NotADirectoryError, PermissionError):  # none that can be seen
        return FileSettings(where, {}, ())
    try:
        if not stat.S_ISREG(mode):
            return FileSettings(where, {}, (f"the settings file {where} is not a file; ignored",))
        with open(where, "rb") as fh:
            raw = fh.read(1 << 20)
    except FileNotFoundError:
        return FileSettings(where, {}, ())
    except OSError as exc:
        return FileSettings(where, {}, (f"cannot read the settings file {where} ({exc}); ignored",))
    try:
        data = _parse(raw.decode("utf-8"))
    except (ValueError, ImportError) as exc:  # TOMLDecodeError, not UTF-8, no TOML reader
        return FileSettings(
            where, {}, (f"the settings file {where} is not valid TOML ({exc}); it is ignored",)
        )
    values = {k: v for k, v in data.items() if isinstance(v, (str, int, float, bool))}
    problems = tuple(
        f"the settings file {where}: '{k}' is not a plain value (a table or a list); ignored"
        for k in data
        if k not in values
    )
    return FileSettings(where, values, problems)


def mentions(name: str) -> bool:
    """Whether the file's text holds `name` at all (a cheap look before parsing it)."""
    try:
        if not stat.S_ISREG(os.stat(path()).st_mode):  # a FIFO would hang the read
            return False
        with open(path(), "rb") as fh:
            return name.encode() in fh.read(1 << 20)
    except OSError:
        return False


def _parse(text: str) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]
    found: dict[str, Any] = tomllib.loads(text)
    return found


def as_text(value: Any) -> str:
    """A file value as a flag or an environment variable would give it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def toml_value(value: Any) -> str:
    """`value` as a TOML literal: a boolean, a number or a basic string."""
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)  # JSON's escapes are TOML's


def set_value(name: str, value: Any | None) -> str:
    """Write `name = value` into the file (None: remove the line), keeping every other line;
    returns the file's path. The file is created 0600 (it may hold an API key)."""
    from pathlib import Path

    from dreamwell.stores import user_output

    where = Path(path())
    try:
        lines = where.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = []
    line = None if value is None else f"{name} = {toml_value(value)}"
    kept, done = [], False
    for old in lines:
        if old.split("=", 1)[0].strip() == name and "=" in old:
            if line is not None and not done:
                kept.append(line)
            done = True
        else:
            kept.append(old)
    if line is not None and not done:
        at = next((i for i, t in enumerate(kept) if t.lstrip().startswith("[")), len(kept))
        kept.insert(at, line)  # before any table: a top-level key
    where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not where.exists():
        where.touch(mode=0o600)
    with user_output(where) as out:
        out.write("\n".join(kept) + "\n")
    return str(where)
