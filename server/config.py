"""Settings: the one place that reads environment variables (prefix DREAMWELL_)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_TENANT = re.compile(r"[A-Za-z0-9_-]{1,64}")


def parse_every(text: str) -> float:
    """'12h', '30m', '1d', '90s' -> seconds (at least one minute)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", text)
    if not match or float(match.group(1)) * _UNITS[match.group(2)] < 60:
        raise ValueError(f"'{text}' is not an interval like 30m, 12h or 1d (at least 1m)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def check_tenant(name: str) -> str:
    if not _TENANT.fullmatch(name):
        raise ValueError(f"tenant name {name!r} must be 1-64 letters, digits, - or _")
    return name


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dreamwell"


# The commands that take each setting as a flag; "*" = every command that opens a data dir.
ALL = ("serve", "dream", "log", "export", "import", "stats", "doctor", "ui")


def _setting(
    default: Any = None,
    meaning: str = "",
    flag_for: tuple[str, ...] = (),
    shown: str | None = None,
    **limits: Any,
) -> Any:
    """A settings field with its README meaning, the commands that take it as a flag and,
    where the value alone would mislead, how its default is shown."""
    extra: dict[str, Any] = {"flag_for": list(flag_for), "shown": shown}
    if callable(default):
        return Field(
            default_factory=default, description=meaning, json_schema_extra=extra, **limits
        )
    return Field(default=default, description=meaning, json_schema_extra=extra, **limits)


class Settings(BaseSettings):
    """Every setting; CLI flags override the environment, which overrides these defaults.
    Each field says which commands take it as a flag: `dreamwell --help` and the README's
    settings table are both generated from here."""

    model_config = SettingsConfigDict(env_prefix="DREAMWELL_", extra="forbid", frozen=True)

    data_dir: Path = _setting(
        default_data_dir,
        "everything is stored here, nothing outside it",
        ALL,
        "`$XDG_DATA_HOME/dreamwell` or `~/.local/share/dreamwell`",
    )
    transport: Literal["stdio", "sse", "http"] = _setting(
        "stdio", "`stdio`, `sse` or `http`", ("serve",)
    )
    host: str = _setting("127.0.0.1", "bind address of HTTP transports", ("serve",))
    port: int = _setting(
        8765,
        "port of HTTP transports and `ui` (0 = any free port)",
        ("serve", "ui"),
        ge=0,
        le=65535,
    )
    namespace: str | None = _setting(
        None, "pin the working-memory namespace, e.g. `patrol/heartbeat`", ("serve",)
    )
    token: str | None = _setting(None, "bearer token for HTTP transports", ("serve",))
    tokens_file: Path | None = _setting(None, "JSON object of bearer token → tenant", ("serve",))
    stateless_http: bool = _setting(False, "streamable HTTP without sessions", ("serve",))
    wm_ttl_minutes: int = _setting(5, "default working-memory TTL", ge=1, le=10_080)
    wm_max_per_namespace: int = _setting(
        50, "working-memory entries per namespace", ge=1, le=10_000
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = _setting(
        "WARNING", "logs go to stderr", ("serve", "dream", "import", "ui")
    )
    # recall
    embedder: Literal["minilm", "ollama", "none"] = _setting(
        "minilm",
        "`minilm` (embedded), `ollama` or `none` (BM25 only)",
        ("serve", "stats", "doctor"),
    )
    ollama_embed_model: str = _setting("nomic-embed-text", "embedding model when `embedder=ollama`")
    min_similarity: float | None = _setting(
        None,
        "cosine below this is ignored in hybrid ranking",
        shown="per embedder (MiniLM 0.2, Ollama 0.5)",
        ge=-1.0,
        le=1.0,
    )
    # share of keywords in hybrid ranking: 1 = BM25 only, 0 = vectors only (for measuring)
    keyword_weight: float = _setting(
        0.6,
        "share of BM25 in hybrid ranking (1 = keywords only, 0 = vectors only)",
        ge=0.0,
        le=1.0,
    )
    # the LLM behind the dream worker (and Ollama embeddings); no host = no LLM
    ollama_host: str | None = _setting(
        None,
        "Ollama for the dream worker's LLM passes (none: they are skipped)",
        ("dream", "doctor", "ui"),
    )
    ollama_model: str = _setting("llama3.2", "the dream worker's model", ("dream", "ui"))
    ollama_timeout: float = _setting(120.0, "seconds per LLM call", gt=0, le=3600)
    # dreaming inside `serve` (off unless set), e.g. "12h", "30m"
    dream_every: str | None = _setting(
        None, "dream inside `serve` on a timer, e.g. `12h`", ("serve",)
    )

    @field_validator("dream_every")
    @classmethod
    def _interval(cls, value: str | None) -> str | None:
        if value is not None:
            parse_every(value)
        return value

    @field_validator("data_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    def tenant_tokens(self) -> dict[str, str]:
        """Bearer token -> tenant name. `token` maps to tenant 'default'; a tokens file is a
        JSON object {"token": "tenant", ...}."""
        tokens: dict[str, str] = {}
        if self.token:
            tokens[self.token] = "default"
        if self.tokens_file is not None:
            data = json.loads(self.tokens_file.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in data.items()
            ):
                raise ValueError("tokens file must be a JSON object of token -> tenant name")
            tokens.update(data)
        for token, tenant in tokens.items():
            check_tenant(tenant)
            if len(token) < 8:
                raise ValueError("a bearer token must be at least 8 characters")
        return tokens


def flag_for(name: str) -> tuple[str, ...]:
    """The commands that take setting `name` as a flag."""
    extra = Settings.model_fields[name].json_schema_extra
    assert isinstance(extra, dict)
    return tuple(str(c) for c in extra["flag_for"] or ())  # type: ignore[union-attr]


def settings_table() -> str:
    """The README's settings table, generated from the model so the two cannot drift."""
    rows = ["| setting | flag | default | meaning |", "|---|---|---|---|"]
    for name, info in Settings.model_fields.items():
        extra = info.json_schema_extra
        assert isinstance(extra, dict)
        commands = flag_for(name)
        flag = "—"
        if commands:
            where = "every command" if commands == ALL else ", ".join(commands)
            flag = f"`--{name.replace('_', '-')}` ({where})"
        shown = extra.get("shown")
        if shown is None:
            value = info.get_default(call_default_factory=False)
            shown = (
                "—"
                if value is None
                else f"`{str(value).lower() if isinstance(value, bool) else value}`"
            )
        rows.append(f"| `{name}` | {flag} | {shown} | {info.description} |")
    return "\n".join(rows) + "\n"
