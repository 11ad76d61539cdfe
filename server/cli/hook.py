"""`dreamwell hook EVENT ...` from the command line: parses only this command's flags (fast),
reads the few settings a hook needs, and runs the event (server/hooks/events.py). Even bad
arguments or settings exit 0, logged to the data directory's hooks.log.

The flags as install writes them (`EVENT`, `--tenant`, `--data-dir` and the hook's setting
flags, as `--flag VALUE` or `--flag=VALUE`) are read without argparse, whose import and parser
building cost a hook ~45 ms under load; anything else (`--help`, an abbreviation, a typo, a
missing value) goes through the argparse parser every other command uses, which says what is
wrong exactly as before."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dreamwell.server.flags import settings_of
from dreamwell.server.hooks import settings as hook_settings
from dreamwell.server.hooks.events import fail_log, hook_command
from dreamwell.server.hooks.settings import plain_arguments
from dreamwell.stores import DataDir

if TYPE_CHECKING:
    import argparse


def hook_main(argv: list[str]) -> int:
    """`dreamwell hook ...` from the command line: even bad arguments or settings exit 0
    (logged to the hooks.log of the data directory given, else the default's), never 2,
    which Claude Code would take as "block this prompt"."""
    args = plain_arguments(argv[1:])
    if args is None:
        args = _parsed(argv)
        if args is None:
            return 0
    given = {k: v for k, v in args.items() if k not in ("event", "tenant", "data_dir")}
    try:
        settings = hook_settings.read(args["data_dir"], given)
    except hook_settings.NotPlain:  # let Settings judge it, as for every other command
        import argparse

        from dreamwell.server.cli import parsing as cli

        try:
            full = cli.settings_from(argparse.Namespace(**args), settings_of("hook"))
            settings = hook_settings.from_settings(full, given)
        except SystemExit:
            where = DataDir(hook_settings.data_dir(args["data_dir"]))
            fail_log(where, f"hook {args['event']} failed: bad settings (said on stderr)")
            return 0
    return hook_command(settings, args["event"], args["tenant"])


def _parsed(argv: list[str]) -> dict[str, Any] | None:
    """The arguments through argparse (`--help`, a bad flag: said as every command says it,
    logged to hooks.log); None when they did not parse."""
    from dreamwell.server.cli import parsing as cli

    parser = _parser(cli)
    try:
        return vars(parser.parse_args(argv[1:]))
    except SystemExit as exc:
        if exc.code not in (0, None):
            where = DataDir(hook_settings.data_dir(_data_dir_in(argv[1:])))
            fail_log(where, f"hook {argv[1:]!r}: bad arguments")
        return None


def _parser(cli: Any) -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(
        prog="dreamwell hook", description=cli.HELP["hook"], formatter_class=cli.DefaultsHelp
    )
    cli.add_arguments("hook", parser)
    return parser


def _data_dir_in(args: list[str]) -> str | None:
    """The `--data-dir` among arguments that did not parse as a whole (None if none)."""
    import argparse

    lenient = argparse.ArgumentParser(add_help=False)
    lenient.add_argument("--data-dir")
    try:
        found, _ = lenient.parse_known_args(args)
    except SystemExit:
        return None
    value = found.data_dir
    return value if isinstance(value, str) else None
