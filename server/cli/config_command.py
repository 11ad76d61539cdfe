"""`dreamwell config get|set|unset|list`: the settings file (server/settings_file.py) from the
command line. `set` checks the value as Settings does (a bad one: one line, exit 2, nothing
written) and writes it as a TOML value; `get` and `list` show the value in effect and where it
came from (flag, environment, settings file or default)."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from typing import Any

from pydantic import SecretStr, ValidationError

from dreamwell.server import settings_file
from dreamwell.server.cli.parsing import given_flags
from dreamwell.server.config import Settings, described, load_settings, origin
from dreamwell.server.flags import settings_of


def config_command(settings: Settings, args: argparse.Namespace) -> int:
    given = given_flags(args, settings_of("config"))
    if args.action == "list":
        for name, shown, came in described(settings, given):
            sys.stdout.write(f"{name} = {shown}\t({came})\n")
        sys.stdout.write(f"# settings file: {settings_file.path()}\n")
        return 0
    if not args.name:
        raise ValueError(f"config {args.action} needs a setting's name, e.g. dream_auto_after")
    name = _known(args.name)
    if args.action == "get":
        row = next(r for r in described(settings, given) if r[0] == name)
        sys.stdout.write(f"{row[1]}\t({row[2]})\n")
        return 0
    if args.action == "unset":
        sys.stdout.write(f"updated {settings_file.set_value(name, None)}: {name} removed\n")
        return 0
    if args.value is None:
        raise ValueError(f"config set {name} needs a value")
    where = settings_file.set_value(name, _checked(name, args.value))
    sys.stdout.write(f"updated {where}: {name} = {args.value}\n")
    if origin(name, {}, settings_file.read()).startswith("environment"):
        sys.stdout.write(f"note: DREAMWELL_{name.upper()} is set and wins over the file\n")
    return 0


def _known(name: str) -> str:
    """`name` if it is a setting, else a usage error naming the nearest."""
    key = name.replace("-", "_").lower()
    if key in Settings.model_fields and key != "store_uri":
        return key
    near = difflib.get_close_matches(key, list(Settings.model_fields), n=1)
    hint = f"; did you mean {near[0]}?" if near else "; `dreamwell config list` shows them"
    raise ValueError(f"no setting '{name}'{hint}")


def _checked(name: str, text: str) -> Any:
    """The value Settings makes of `text`, as the file keeps it; ValueError if it is bad."""
    try:
        value = getattr(load_settings({name: text}), name)
    except ValidationError as err:
        first = err.errors()[0]
        said = first["msg"].removeprefix("Value error, ")
        raise ValueError(f"bad setting {name}={text!r}: {said}") from None
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, (bool, int, float)):
        return value
    return text if name in ("data_dir", "cache_dir", "tokens_file") else str(value)
