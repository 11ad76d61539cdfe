"""The README's settings table (name, flag, default, the values accepted, meaning), generated
from the settings model (server/config.py) and what each setting means (server/flags.py), so
that the two cannot drift: tests/server/cli/test_cli.py checks the README holds it."""

from __future__ import annotations

from dreamwell.server.config import Settings
from dreamwell.server.flags import COMMANDS, SETTINGS, shown_default


def settings_table() -> str:
    """The README's settings table, generated from the model so the two cannot drift."""
    rows = ["| setting | flag | default | accepted | meaning |", "|---|---|---|---|---|"]
    for name, info in Settings.model_fields.items():
        meta = SETTINGS[name]
        flag = "—"
        if meta.commands:
            where = "every command" if meta.commands == COMMANDS else ", ".join(meta.commands)
            flag = f"`--{name.replace('_', '-')}` ({where})"
        shown = meta.shown or shown_default(name)  # the words --help shows, as code here
        if meta.shown is None and meta.default is not None:
            shown = f"`{shown}`"
        rows.append(f"| `{name}` | {flag} | {shown} | {accepted(name)} | {info.description} |")
    return "\n".join(rows) + "\n"


def accepted(name: str) -> str:
    """The values setting `name` takes, from the model's own type and bounds."""
    import annotated_types as at

    info = Settings.model_fields[name]
    if name in ("dream_every", "dream_auto_after"):
        return "an interval ≥ `1m`: `30m`, `12h`, `1d`"
    kind = str(info.annotation)
    if "Literal" in kind:
        return ", ".join(f"`{c}`" for c in SETTINGS[name].choices)
    if info.annotation is bool:
        return "`on`/`off`"
    if "Path" in kind or "dict" in kind or name == "llm_base_url":
        return {"storage_options": "a JSON object", "llm_base_url": "an http(s) URL"}.get(
            name, "a path" + (", or `s3://`, `gs://`, `az://`" if name == "data_dir" else "")
        )
    low = next((m for m in info.metadata if isinstance(m, (at.Ge, at.Gt))), None)
    high = next((m for m in info.metadata if isinstance(m, at.Le)), None)
    if low is not None and high is not None:
        sign = ">" if isinstance(low, at.Gt) else ""
        bottom = getattr(low, "ge", getattr(low, "gt", None))
        return f"{sign}{bottom:,} to {high.le:,}".replace(",", " ")
    return "text"
