"""The few settings a hook reads, without pydantic: importing pydantic and building `Settings`
costs a hook process 0.17 s of its 0.3 s budget (tests/bench/hook_bench.py). The values
come from the same flags, `DREAMWELL_*` variables and settings file (server/settings_file.py)
as `Settings`; anything this reader does
not recognise as a plain valid value (a typo, an out-of-range number) sends the hook through
`Settings` instead, which reports it exactly as every other command does. A test checks that
both readers agree."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dreamwell.server.config import Settings

_TRUE = ("1", "true", "yes", "on", "y", "t")
_FALSE = ("0", "false", "no", "off", "n", "f")
MAX_CHARS_RANGE = (200, 100_000)  # Settings.hook_max_chars' bounds
SESSION_CHARS_RANGE = (0, 10_000_000)  # Settings.hook_session_chars' bounds
EMBEDDERS = ("e5", "minilm", "ollama", "none")  # Settings.embedder's values


SESSIONS_RANGE = (0, 100_000)  # Settings.dream_auto_sessions' bounds
# settings the session-end hook hands on, as flags, to the dream it starts
DREAM_FLAGS = ("llm_provider", "llm_model", "claude_path", "dream_budget_tokens")


@dataclass(frozen=True)
class HookSettings:
    data_dir: Path
    record_conversation: bool = True
    hook_max_chars: int = 6000
    namespace: str | None = None
    dream_auto: bool = True
    dream_auto_after: float = 86400.0  # seconds
    dream_auto_sessions: int = 5
    dream_flags: tuple[str, ...] = ()  # given on the hook's command line, for its dream
    project: str | None = None  # pinned (docs/projects.md); else the hook input's `cwd`
    hook_session_chars: int = 4000  # characters the hooks inject into a session in all
    embedder: str = "e5"  # "none": the resident holds no store for hybrid ranking
    fell_back: tuple[str, ...] = ()  # settings that took their default (Settings.fell_back)


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


def _session_chars(text: str) -> int:
    low, high = SESSION_CHARS_RANGE
    if not text.strip().isdigit() or not low <= int(text) <= high:
        raise NotPlain(text)
    return int(text)


def _embedder(text: str) -> str:
    if text not in EMBEDDERS:
        raise NotPlain(text)
    return text


def _sessions(text: str) -> int:
    if not text.strip().isdigit() or not SESSIONS_RANGE[0] <= int(text) <= SESSIONS_RANGE[1]:
        raise NotPlain(text)
    return int(text)


def _after(text: str) -> float:
    from dreamwell.server.flags import parse_every

    try:
        return parse_every(text)
    except ValueError as exc:
        raise NotPlain(text) from exc


def dream_flags(given: Mapping[str, str | None]) -> tuple[str, ...]:
    """The DREAM_FLAGS given on the command line, as flags again (the environment, the
    dream inherits as it is)."""
    out: list[str] = []
    for name in DREAM_FLAGS:
        value = given.get(name)
        if value is not None:
            out += ["--" + name.replace("_", "-"), str(value)]
    return tuple(out)


def data_dir(flag: str | None) -> Path:
    """The data directory alone (where even a hook with bad settings logs that)."""
    from dreamwell.server.where import data_dir as named

    return Path(named(flag))


def read(data_dir_flag: str | None, given: Mapping[str, str | None] | None = None) -> HookSettings:
    """The hook's settings from its flags (`given`: setting -> value; --data-dir apart) and
    the environment; raises NotPlain."""
    from dreamwell.server import settings_file

    file = settings_file.read()
    from dreamwell.server.flags import SETTINGS

    if file.problems or not set(file.values) <= set(SETTINGS):
        raise NotPlain(file.path)  # Settings says what is wrong with the file
    env = {k: settings_file.as_text(v) for k, v in file.values.items()}
    env |= {k[10:].lower(): v for k, v in os.environ.items() if k.startswith("DREAMWELL_")}
    env |= {k: v for k, v in (given or {}).items() if v is not None}
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
        _bool(env["dream_auto"]) if "dream_auto" in env else True,
        _after(env["dream_auto_after"]) if "dream_auto_after" in env else 86400.0,
        _sessions(env["dream_auto_sessions"]) if "dream_auto_sessions" in env else 5,
        dream_flags(given or {}),
        env.get("project") or None,
        _session_chars(env["hook_session_chars"]) if "hook_session_chars" in env else 4000,
        _embedder(env["embedder"]) if "embedder" in env else "e5",
    )


def from_settings(
    settings: Settings, given: Mapping[str, str | None] | None = None
) -> HookSettings:
    """The same values from a full `Settings` (`given`: the flags, for the dream's)."""
    from dreamwell.server.flags import parse_every

    return HookSettings(
        settings.data_dir,
        settings.record_conversation,
        settings.hook_max_chars,
        settings.namespace,
        settings.dream_auto,
        parse_every(settings.dream_auto_after),
        settings.dream_auto_sessions,
        dream_flags(given or {}),
        settings.project,
        settings.hook_session_chars,
        settings.embedder,
        settings.fell_back,
    )


def plain_arguments(words: list[str]) -> dict[str, Any] | None:
    """The hook's arguments as argparse would read them (flag -> value, None when absent),
    or None when they are not one event and known `--flag VALUE`/`--flag=VALUE` pairs
    (server/cli/hook.py and the resident read a hook's arguments this way, without argparse)."""
    from dreamwell.server.flags import settings_of
    from dreamwell.server.hooks.agents.table import HOOK_EVENTS

    flags = {"--tenant": "tenant"} | {
        "--" + name.replace("_", "-"): name for name in settings_of("hook")
    }
    found: dict[str, Any] = dict.fromkeys(flags.values())
    event = None
    at = 0
    while at < len(words):
        word = words[at]
        name, equals, value = word.partition("=")
        if name in flags and equals:
            found[flags[name]] = value
        elif word in flags and at + 1 < len(words) and not words[at + 1].startswith("-"):
            found[flags[word]] = words[at + 1]
            at += 1
        elif word in HOOK_EVENTS and event is None:
            event = word
        else:
            return None
        at += 1
    return None if event is None else found | {"event": event}
