"""The few settings a hook reads, without pydantic: importing pydantic and building `Settings`
costs a hook process 0.17 s of its 0.3 s budget (tests/bench/hook_bench.py). The values
come from the same flags and `DREAMWELL_*` variables as `Settings`; anything this reader does
not recognise as a plain valid value (a typo, an out-of-range number) sends the hook through
`Settings` instead, which reports it exactly as every other command does. A test checks that
both readers agree."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dreamwell.server.config import Settings

_TRUE = ("1", "true", "yes", "on", "y", "t")
_FALSE = ("0", "false", "no", "off", "n", "f")
MAX_CHARS_RANGE = (200, 100_000)  # Settings.hook_max_chars' bounds


@dataclass(frozen=True)
class HookSettings:
    data_dir: Path
    record_conversation: bool = True
    hook_max_chars: int = 6000
    namespace: str | None = None
    project: str | None = None  # pinned (SPEC §11); else the hook input's `cwd`


class NotPlain(ValueError):
    """A value only `Settings` can judge."""


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE or low in _FALSE:
        return low in _TRUE
    raise NotPlain(text)


def _chars(text: str) -> int:
    if not text.strip().isdigit():
        raise NotPlain(text)
    value = int(text)
    if not MAX_CHARS_RANGE[0] <= value <= MAX_CHARS_RANGE[1]:
        raise NotPlain(text)
    return value


def data_dir(flag: str | None) -> Path:
    """The data directory alone (where even a hook with bad settings logs that)."""
    given = flag or os.environ.get("DREAMWELL_DATA_DIR")
    if not given:
        base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        given = str(Path(base) / "dreamwell")
    return Path(given).expanduser().resolve()


def read(data_dir_flag: str | None) -> HookSettings:
    """The hook's settings from the --data-dir flag and the environment; raises NotPlain."""
    env = {k[10:].lower(): v for k, v in os.environ.items() if k.startswith("DREAMWELL_")}
    namespace = env.get("namespace") or None
    if namespace is not None:
        from dreamwell.stores import StoreError
        from dreamwell.stores.working import check_own_namespace

        try:
            check_own_namespace(namespace)
        except StoreError as exc:
            raise NotPlain(namespace) from exc
    return HookSettings(
        data_dir(data_dir_flag),
        _bool(env["record_conversation"]) if "record_conversation" in env else True,
        _chars(env["hook_max_chars"]) if "hook_max_chars" in env else 6000,
        namespace,
        env.get("project") or None,
    )


def from_settings(settings: Settings) -> HookSettings:
    """The same five values from a full `Settings`."""
    return HookSettings(
        settings.data_dir,
        settings.record_conversation,
        settings.hook_max_chars,
        settings.namespace,
        settings.project,
    )
