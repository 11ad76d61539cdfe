"""Settings: the one place that reads environment variables (prefix DREAMWELL_)."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from dreamwell.server import settings_file, where
from dreamwell.server.flags import SETTINGS, parse_every, shown_default

if TYPE_CHECKING:
    from dreamwell.server.settings_file import FileSettings
    from dreamwell.stores.remote import Remote

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_TENANT = re.compile(r"[A-Za-z0-9_-]{1,64}")


def check_tenant(name: str) -> str:
    if not _TENANT.fullmatch(name):
        raise ValueError(f"tenant name {name!r} must be 1-64 letters, digits, - or _")
    return name


AWS_VARIABLES = {  # the usual AWS_* variables -> storage_options keys (explicit ones win)
    "AWS_ENDPOINT": "endpoint",
    "AWS_ENDPOINT_URL": "endpoint",
    "AWS_ENDPOINT_URL_S3": "endpoint",
    "AWS_ALLOW_HTTP": "allow_http",
    "AWS_REGION": "region",
    "AWS_DEFAULT_REGION": "region",
    "AWS_ACCESS_KEY_ID": "aws_access_key_id",
    "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key",
    "AWS_SESSION_TOKEN": "aws_session_token",
}


def aws_environment() -> dict[str, str]:
    """The object-store options the environment's AWS_* variables set: LanceDB and obstore
    each read only some of them (a replica with AWS_ENDPOINT and AWS_ALLOW_HTTP=true was
    refused as unreachable), so they are read here and passed as options to both."""
    found: dict[str, str] = {}
    for variable, key in AWS_VARIABLES.items():
        value = os.environ.get(variable)
        if value and key not in found:
            found[key] = value.strip().lower() if key == "allow_http" else value
    return found


def default_data_dir() -> Path:
    return Path(where.default_data_dir())


def named_data_dir(data_dir: Path) -> Path | None:
    """`data_dir` when it is not the default: what the hooks and the server install writes
    must be told (`--data-dir`, DREAMWELL_DATA_DIR); None for the default."""
    return None if data_dir == default_data_dir().resolve() else data_dir


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dreamwell"


def client_locations() -> tuple[Path, Path | None, Path | None]:
    """(home, %APPDATA%, $XDG_CONFIG_HOME): where `dreamwell install` finds client configs."""
    appdata = os.environ.get("APPDATA")
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return Path.home(), Path(appdata) if appdata else None, Path(xdg) if xdg else None


def codex_home() -> Path | None:
    """Codex's home when `CODEX_HOME` names one (Codex reads its config.toml and hooks.json
    there instead of ~/.codex), made absolute and canonical as Codex makes it; else None."""
    given = os.environ.get("CODEX_HOME")
    return Path(given).expanduser().resolve() if given else None


def _setting(name: str, factory: Callable[[], Any] | None = None, **limits: Any) -> Any:
    """A settings field described by its row in `flags.SETTINGS`, which holds its default
    (`factory` computes one that depends on the environment, as that row's words say)."""
    meta = SETTINGS[name]
    if factory is not None:
        return Field(default_factory=factory, description=meta.meaning, **limits)
    return Field(default=meta.default, description=meta.meaning, **limits)


class Settings(BaseSettings):
    """Every setting; CLI flags override the environment, which overrides these defaults.
    What each means and which commands take it as a flag: `flags.SETTINGS`."""

    model_config = SettingsConfigDict(env_prefix="DREAMWELL_", extra="forbid", frozen=True)
    # settings from the environment or the settings file that could not be used and took
    # their default instead, each said in one line (`load_settings`)
    _fell_back: tuple[str, ...] = PrivateAttr(default=())

    data_dir: Path = _setting("data_dir", default_data_dir)
    storage_options: dict[str, str] | None = _setting("storage_options")
    cache_dir: Path = _setting("cache_dir", default_cache_dir)
    store_uri: str | None = _setting("store_uri")
    transport: Literal["stdio", "sse", "http"] = _setting("transport")
    host: str = _setting("host")
    port: int = _setting("port", ge=0, le=65535)
    namespace: str | None = _setting("namespace")
    token: str | None = _setting("token")
    tokens_file: Path | None = _setting("tokens_file")
    no_token: bool = _setting("no_token")
    stateless_http: bool = _setting("stateless_http")
    wm_ttl_minutes: int = _setting("wm_ttl_minutes", ge=1, le=10_080)
    wm_max_per_namespace: int = _setting("wm_max_per_namespace", ge=1, le=10_000)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = _setting("log_level")
    # recall
    embedder: Literal["e5", "minilm", "ollama", "none"] = _setting("embedder")
    ollama_embed_model: str = _setting("ollama_embed_model")
    min_similarity: float | None = _setting("min_similarity", ge=-1.0, le=1.0)
    # share of keywords in hybrid ranking: 1 = BM25 only, 0 = vectors only (for measuring);
    # None = tuned per embedder
    keyword_weight: float | None = _setting("keyword_weight", ge=0.0, le=1.0)
    contextual: bool = _setting("contextual")
    # deep search: re-order the top `rerank_depth` hits with the cross-encoder (~20 ms each)
    rerank: bool = _setting("rerank")
    rerank_depth: int = _setting("rerank_depth", ge=2, le=100)
    # Ollama: embeddings, and the dream's LLM when llm_base_url is unset; no host = no LLM
    ollama_host: str | None = _setting("ollama_host")
    ollama_model: str = _setting("ollama_model")
    ollama_timeout: float = _setting("ollama_timeout", gt=0, le=3600)
    # the dream's LLM: ollama (Ollama's API) or openai (any OpenAI-compatible chat endpoint:
    # LM Studio, llama.cpp's server, vLLM, LocalAI, hosted APIs); the key is never shown
    llm_provider: Literal["ollama", "openai", "claude-code"] = _setting("llm_provider")
    llm_base_url: str | None = _setting("llm_base_url")
    llm_model: str | None = _setting("llm_model")
    llm_api_key: SecretStr | None = _setting("llm_api_key")
    llm_timeout: float = _setting("llm_timeout", gt=0, le=7200)
    llm_context: int = _setting("llm_context", ge=512, le=1_048_576)
    llm_max_tokens: int = _setting("llm_max_tokens", ge=16, le=131_072)
    claude_path: str = _setting("claude_path")
    dream_budget_tokens: int = _setting("dream_budget_tokens", ge=1, le=100_000_000)
    record_conversation: bool = _setting("record_conversation")
    hook_max_chars: int = _setting("hook_max_chars", ge=200, le=100_000)
    hook_session_chars: int = _setting("hook_session_chars", ge=0, le=10_000_000)
    enrich: bool = _setting("enrich")
    # dreaming inside `serve` (off unless set), e.g. "12h", "30m"
    dream_every: str | None = _setting("dream_every")
    dream_auto: bool = _setting("dream_auto")
    dream_auto_after: str = _setting("dream_auto_after")
    dream_auto_sessions: int = _setting("dream_auto_sessions", ge=0, le=100_000)
    skills_auto_approve: bool = _setting("skills_auto_approve")
    # projects (docs/projects.md): pin the caller's project; categories global beside the built-in
    # ones
    project: str | None = _setting("project")
    global_categories: str = _setting("global_categories")

    @field_validator("global_categories")
    @classmethod
    def _global_categories(cls, value: str) -> str:
        from dreamwell.stores import StoreError, check_category

        for name in value.split(","):
            try:
                check_category(name.strip() or None)
            except StoreError as exc:
                raise ValueError(f"{name.strip()!r}: {exc}") from exc
        return value

    def global_category_list(self) -> tuple[str, ...]:
        """`global_categories` as a tuple of category prefixes."""
        return tuple(c.strip() for c in self.global_categories.split(",") if c.strip())

    @field_validator("dream_every", "dream_auto_after")
    @classmethod
    def _interval(cls, value: str | None) -> str | None:
        if value is not None:
            parse_every(value)
        return value

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str | None) -> str | None:
        """Only namespaces working memory reads back (`session/…`, `patrol/…`, `subagent/…`):
        entries saved under any other would be written and never found after a restart."""
        if value is None:
            return None
        from dreamwell.stores import StoreError
        from dreamwell.stores.working import check_own_namespace

        try:
            return check_own_namespace(value)
        except StoreError as exc:
            raise ValueError(str(exc)) from exc

    @field_validator("llm_base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"https?://[^\s/]+(/\S*)?", value):
            raise ValueError("must be an http:// or https:// URL, e.g. http://127.0.0.1:1234/v1")
        return value

    @model_validator(mode="before")
    @classmethod
    def _object_store(cls, data: Any) -> Any:
        """`data_dir` given as `s3://bucket/prefix`: the location goes to `store_uri` and
        `data_dir` becomes this machine's cache of it (`stores/remote/location.py`)."""
        if not isinstance(data, dict):
            return data
        given = data.get("data_dir")
        if isinstance(given, str) and "://" in given:
            from dreamwell.stores import remote

            uri = remote.parse(given)  # ValueError: one line naming the schemes
            cache = Path(str(data.get("cache_dir") or default_cache_dir())).expanduser()
            data = {**data, "store_uri": uri, "data_dir": remote.cache_path(cache, uri)}
        return data

    @field_validator("data_dir", "cache_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator("storage_options", mode="before")
    @classmethod
    def _options(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise ValueError('must be a JSON object, e.g. {"endpoint": "http://..."}') from None
        if value is not None and not isinstance(value, dict):
            raise ValueError('must be a JSON object, e.g. {"endpoint": "http://..."}')
        if value is None:
            return None
        return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}

    @property
    def fell_back(self) -> tuple[str, ...]:
        """What could not be used and was replaced by its default, one line each."""
        return self._fell_back

    def remote(self) -> Remote | None:
        """The object-store location, with its options, or None for a local directory."""
        if self.store_uri is None:
            return None
        from dreamwell.stores.remote import Remote

        options = self.storage_options
        if self.store_uri.startswith("s3://"):  # the usual variables, as README promises
            options = {**aws_environment(), **(options or {})} or None
        return Remote.of(self.store_uri, options)

    def known_tenant(self, name: str) -> str:
        """`name` if it is a tenant: its folder exists under the data directory, or the
        tokens file names it. A mistyped --tenant is refused (ValueError naming the known
        ones) instead of silently making a store nobody reads. On object storage the
        tenants live there, not in this cache: only the name is checked."""
        check_tenant(name)
        if self.store_uri:
            return name
        folder = self.data_dir / "tenants"
        known = {p.name for p in folder.iterdir() if p.is_dir()} if folder.is_dir() else set()
        if self.tokens_file is not None and self.tokens_file.is_file():
            with contextlib.suppress(ValueError):
                known.update(t for t in _read_tokens(self.tokens_file).values() if t)
        if name in known:
            return name
        shown = ", ".join(sorted(known)) or "none yet"
        raise ValueError(
            f"no tenant '{name}' in {self.data_dir} (tenants: {shown}); check --tenant, or "
            "leave it out for the root store"
        )

    def tenant_tokens(self) -> dict[str, str]:
        """Bearer token -> tenant name. A single `token` serves the data directory itself
        (tenant ''): the store the user already has over stdio. Each token of a tokens file
        (a JSON object {"token": "tenant", ...}) is a tenant with its own sub-directory."""
        tokens: dict[str, str] = {}
        if self.token:
            if len(self.token) < 8:
                raise ValueError("token: a bearer token must be at least 8 characters")
            tokens[self.token] = ""
        if self.tokens_file is not None:
            tokens.update(_read_tokens(self.tokens_file))
        return tokens


def _read_tokens(path: Path) -> dict[str, str]:
    """The tokens file, or a one-line ValueError naming it (never a traceback, never empty
    because it was damaged: a server must not start with fewer tenants than configured)."""
    shape = "it must be a JSON object of bearer token -> tenant name"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read tokens file {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"tokens file {path} is not valid JSON ({exc.msg} at line {exc.lineno}); {shape}"
        ) from exc
    except ValueError as exc:  # not UTF-8
        raise ValueError(f"tokens file {path} is not UTF-8 text; {shape}") from exc
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ValueError(f"tokens file {path}: {shape}")
    for token, tenant in data.items():
        if not _TENANT.fullmatch(tenant):
            raise ValueError(
                f"tokens file {path}: tenant name {tenant!r} must be 1-64 letters, digits, - or _"
            )
        if len(token) < 8:
            raise ValueError(f"tokens file {path}: a bearer token must be at least 8 characters")
    return data


SECRET = ("llm_api_key", "token", "storage_options")  # never shown


def origin(name: str, given: Mapping[str, Any], file: FileSettings) -> str:
    """Where setting `name`'s value comes from: flags > environment > file > default."""
    if name in given:
        return "flag"
    if f"DREAMWELL_{name.upper()}" in os.environ:
        return f"environment (DREAMWELL_{name.upper()})"
    if name in file.values:
        return f"settings file ({file.path})"
    return "default"


def load_settings(given: Mapping[str, Any]) -> Settings:
    """Settings from the flags `given`, the environment, the settings file and the defaults.
    A value from the environment or the file that cannot be used takes that setting's
    default, said in `fell_back` (one bad setting never switches memory off); a bad flag,
    which the user just typed, raises ValidationError."""
    file = settings_file.read()
    problems = list(file.problems)
    unknown = sorted(set(file.values) - set(Settings.model_fields))
    problems += [f"the settings file {file.path}: no setting '{k}'; ignored" for k in unknown]
    env = {f"DREAMWELL_{k.upper()}" for k in Settings.model_fields} & set(os.environ)
    from_file = {
        k: v
        for k, v in file.values.items()
        if k in Settings.model_fields and k not in given and f"DREAMWELL_{k.upper()}" not in env
    }
    forced: dict[str, Any] = {}
    for _ in Settings.model_fields:
        try:
            settings = Settings(**{**from_file, **given, **forced})
        except ValidationError as err:
            name = _bad_key(err)
            if name is None or name in given or name in forced:
                raise
            problems.append(_fallback_line(name, err, origin(name, given, file)))
            from_file.pop(name, None)
            forced[name] = Settings.model_fields[name].get_default(call_default_factory=True)
            continue
        settings._fell_back = tuple(problems)
        return settings
    raise AssertionError("unreachable: each pass forces one more setting")  # pragma: no cover


def _bad_key(err: ValidationError) -> str | None:
    loc = err.errors()[0]["loc"]
    name = str(loc[0]) if loc else None
    return name if name in Settings.model_fields else None


def _fallback_line(name: str, err: ValidationError, where: str) -> str:
    first = err.errors()[0]
    shown = "***" if name in SECRET else repr(first.get("input"))
    return (
        f"setting {name}={shown} from the {where} is not usable "
        f"({first['msg'].removeprefix('Value error, ')}); using the "
        f"default {shown_default(name)} until it is fixed"
    )


def described(settings: Settings, given: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(name, value as shown, where it came from) for every setting (`dreamwell config
    list`, `doctor`); secrets are shown as ***."""
    file = settings_file.read()
    rows = []
    for name in Settings.model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        shown = "***" if name in SECRET and value else _shown(value)
        came = origin(name, given, file)
        if any(line.startswith(f"setting {name}=") for line in settings.fell_back):
            came = f"default: the {came.split(' (')[0]}'s value is not usable"
        rows.append((name, shown, came))
    return rows


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "not set" if value is None else str(value)
