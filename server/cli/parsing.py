"""The `dreamwell` command line's parsing: each command's help, its own arguments and its
setting flags (derived from `flags.SETTINGS`), and the Settings built from them.

Parsing imports nothing heavy (no MCP SDK, LanceDB, onnxruntime or Tantivy), so `--help` is
fast. `dreamwell hook` parses its own flags here too, without the rest of the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from dreamwell.server.flags import COMMANDS as NAMES
from dreamwell.server.flags import SETTINGS, settings_of, shown_default

if TYPE_CHECKING:
    from dreamwell.server.config import Settings

HELP = {
    "serve": "run the MCP server",
    "dream": "refine long-term memory (the dream worker)",
    "log": "append to the conversation or feedback log",
    "export": "write memories as JSON Lines",
    "import": "read memories from dreamwell, knowledge-graph or mcp-memory-service files",
    "stats": "what is stored: counts, categories, vectors, index, disk, last dream",
    "doctor": "check the data directory and say how to fix what is wrong",
    "ui": "browse and curate memory in a web browser (127.0.0.1)",
    "reindex": "rebuild the text index from the stored records (root store and every tenant)",
    "skills": "list, show, import, export, archive, restore, pin or approve skills",
    "hook": "run a client hook (Claude Code): reads its JSON on stdin, always exits 0",
    "install": "connect a client: write dreamwell into its MCP config (and Claude Code's hooks)",
    "config": "show or change the settings file: get NAME, set NAME VALUE, unset NAME, list",
}


class _Version(argparse.Action):
    """`--version`, looked up only when asked for."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("dreamwell")
        except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
            found = "unknown"
        sys.stdout.write(f"dreamwell {found}\n")
        parser.exit()


def add_settings(parser: argparse.ArgumentParser, command: str) -> None:
    """The flags of `command` that set a setting, with their meaning from `flags.SETTINGS`
    (values are checked by Settings, which names the key in a one-line error)."""
    for name in settings_of(command):
        meta = SETTINGS[name]
        flag = "--" + name.replace("_", "-")
        if meta.switch:
            parser.add_argument(flag, action="store_true", default=None, help=meta.meaning)
        else:
            metavar = "|".join(meta.choices) if meta.choices else None
            parser.add_argument(flag, help=meta.meaning, metavar=metavar)


def _dream_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--once", action="store_true", help="run one cycle now")
    what.add_argument("--every", help="run a cycle every interval, e.g. 12h")
    what.add_argument("--report", nargs="?", const="", metavar="RUN", help="print a report")
    what.add_argument("--undo", metavar="RUN", help="revert a cycle")
    parser.add_argument("--dry-run", action="store_true", help="with --once: plan only")
    parser.add_argument(
        "--tenant", help="one tenant (default: --once/--every dream the root and every tenant)"
    )


def _log_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", help="a tenant's log instead of the default")
    parser.add_argument("log", choices=["conversation", "feedback"], help="which log")
    parser.add_argument("text", help="what was said, or the feedback")
    parser.add_argument("--session", default="cli", help="the conversation it belongs to")
    parser.add_argument("--role", choices=["user", "assistant"], default="user", help="who said it")
    parser.add_argument(
        "--kind",
        default="Correction",
        type=_feedback_kind,
        help="Correction, helpful or harmful",
    )
    parser.add_argument("--memory-id", help="the memory the feedback is about")


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", help="a tenant's memory instead of the default")
    parser.add_argument("--include-archived", action="store_true", help="archived too")
    parser.add_argument("--with-vectors", action="store_true", help="add stored vectors")
    parser.add_argument("--output", "-o", metavar="FILE", help="default: stdout")


def _import_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="JSON Lines or JSON ('-' = stdin)")
    parser.add_argument("--tenant", help="a tenant's memory instead of the default")
    parser.add_argument("--skip-bad", action="store_true", help="import the good lines")


def _skills_arguments(parser: argparse.ArgumentParser) -> None:
    from dreamwell.server.cli.skills import add_arguments

    add_arguments(parser)


def _hook_arguments(parser: argparse.ArgumentParser) -> None:
    from dreamwell.server.hooks.agents.table import HOOK_EVENTS

    parser.add_argument("event", choices=HOOK_EVENTS, metavar="EVENT")
    parser.add_argument("--tenant", help="a tenant's memory instead of the default")


def _install_arguments(parser: argparse.ArgumentParser) -> None:
    from dreamwell.server.cli.install import add_arguments

    add_arguments(parser)


def _config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["get", "set", "unset", "list"])
    parser.add_argument("name", nargs="?", help="a setting (README's settings table)")
    parser.add_argument("value", nargs="?", help="with set: its new value")


_OWN_ARGUMENTS = {
    "config": _config_arguments,
    "dream": _dream_arguments,
    "log": _log_arguments,
    "export": _export_arguments,
    "import": _import_arguments,
    "doctor": lambda p: p.add_argument("--tenant", help="check one tenant instead of all"),
    "reindex": lambda p: p.add_argument(
        "--tenant", help="one tenant (default: the root and every tenant)"
    ),
    "skills": _skills_arguments,
    "hook": _hook_arguments,
    "install": _install_arguments,
}


def _own_arguments(name: str, parser: argparse.ArgumentParser) -> None:
    own = _OWN_ARGUMENTS.get(name)
    if own is not None:
        own(parser)


FEEDBACK_KINDS = ("Correction", "helpful", "harmful")  # what the dream reads


def _feedback_kind(value: str) -> str:
    for kind in FEEDBACK_KINDS:
        if value.casefold() == kind.casefold():
            return kind
    raise argparse.ArgumentTypeError(f"{value!r} is not one of {', '.join(FEEDBACK_KINDS)}")


class DefaultsHelp(argparse.HelpFormatter):
    """Help that shows each flag's default where it is known without the Settings model."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "%(default)" in text or action.help == argparse.SUPPRESS or not action.option_strings:
            return action.help
        words = self._prog.split()  # "dreamwell serve", "dreamwell skills list"
        shown = _default_of(action, words[1] if len(words) > 1 else "")
        return f"{text} (default: {shown})" if shown else action.help


def _default_of(action: argparse.Action, command: str) -> str:
    """The default shown: a setting's from `flags.SETTINGS`, where Settings takes it from
    (Settings itself needs pydantic, which --help does not import), another argument's own."""
    if action.dest in SETTINGS:
        return shown_default(action.dest, command)
    if action.default in (None, argparse.SUPPRESS) or isinstance(action.default, (bool, list)):
        return ""
    return str(action.default)


class _Parser(argparse.ArgumentParser):
    """A parser whose unknown flags are one line naming the nearest known one."""

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> Any:
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            self._unknown(extra[0], getattr(parsed, "command", None))
        return parsed

    def error(self, message: str) -> NoReturn:
        """A usage error: one line and where the help is (not the whole usage), exit 2; a
        bare `dreamwell` shows the help."""
        if self.prog == "dreamwell" and "required: COMMAND" in message:
            self.print_help(sys.stderr)
            raise SystemExit(2)
        sys.stderr.write(f"{self.prog}: {message}; see {self.prog} --help\n")
        raise SystemExit(2)

    def _unknown(self, given: str, command: str | None) -> None:
        import difflib

        sub = self._subparsers._group_actions[0] if self._subparsers else None
        chosen = getattr(sub, "choices", {}).get(command) if sub is not None else None
        known = [o for a in (chosen or self)._actions for o in a.option_strings]
        near = difflib.get_close_matches(given.split("=")[0], known, n=1, cutoff=0.6)
        where = f"dreamwell {command}" if command else "dreamwell"
        hint = f"; did you mean {near[0]}?" if near else f"; see {where} --help"
        sys.stderr.write(f"{where}: unknown argument {given}{hint}\n")
        raise SystemExit(2)


def parser() -> argparse.ArgumentParser:
    top = _Parser(prog="dreamwell", description="MCP memory server.")
    top.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    assert tuple(HELP) == NAMES
    for name, text in HELP.items():
        command = sub.add_parser(
            name,
            help=text,
            description=text[0].upper() + text[1:] + ".",
            formatter_class=DefaultsHelp,
        )
        add_arguments(name, command)
    return top


def add_arguments(name: str, command: argparse.ArgumentParser) -> None:
    """Command `name`'s own arguments and its setting flags."""
    _own_arguments(name, command)
    add_settings(command, name)


class BadSetting(ValueError):
    """A setting's value cannot be used; the text names the key and the value."""


def given_flags(args: argparse.Namespace, keys: Sequence[str]) -> dict[str, Any]:
    """The settings given as flags (setting -> value)."""
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}


def read_settings(args: argparse.Namespace, keys: Sequence[str]) -> Settings:
    """Flags beat environment variables, which beat the settings file; a bad flag raises
    BadSetting, a bad value elsewhere takes its default (`config.load_settings`)."""
    from pydantic import ValidationError

    from dreamwell.server.config import load_settings

    given = given_flags(args, keys)
    try:
        settings = load_settings(given)
        settings.tenant_tokens()
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        secret = any(w in key for w in ("key", "token", "storage_options"))
        shown = "***" if secret else repr(first.get("input"))
        said = first["msg"].removeprefix("Value error, ")
        raise BadSetting(f"bad setting {key}={shown}: {said}") from None
    except (OSError, ValueError) as err:
        raise BadSetting(f"bad setting {err}") from None
    return settings


def settings_from(args: argparse.Namespace, keys: Sequence[str]) -> Settings:
    """Flags beat environment variables; a bad value is one line on stderr and exit code 2."""
    try:
        return read_settings(args, keys)
    except BadSetting as err:
        sys.stderr.write(f"dreamwell: {err}\n")
        raise SystemExit(2) from None
