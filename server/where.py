"""Where the data directory is: the `--data-dir` flag, else DREAMWELL_DATA_DIR, else the
settings file's `data_dir`, else `$XDG_DATA_HOME/dreamwell` (`~/.local/share/dreamwell`).
Standard library only (`os.path`, not `pathlib`): the stdio server's early reader finds the
lists the last server kept here before its first reply, which waits for every import
(server/transports/early.py). The settings' default (config.py) and the hooks' reader
(hooks/settings.py) take it from here."""

from __future__ import annotations

import os


def default_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return os.path.join(base, "dreamwell")


def data_dir(flag: str | None) -> str:
    """The data directory a flag (None: not given) and the environment name, made absolute."""
    given = flag or os.environ.get("DREAMWELL_DATA_DIR") or _in_file() or default_data_dir()
    return os.path.realpath(os.path.expanduser(given))


def _in_file() -> str | None:
    """`data_dir` from the settings file (server/settings_file.py), when it is set there."""
    from dreamwell.server import settings_file

    if not settings_file.mentions("data_dir"):  # no TOML parser (~17 ms) on the early path
        return None
    value = settings_file.read().values.get("data_dir")
    return value if isinstance(value, str) and value else None
