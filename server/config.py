"""Settings: the one place that reads environment variables (prefix DREAMWELL_)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Literal

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


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dreamwell"


class Settings(BaseSettings):
    """Every setting; CLI flags override the environment, which overrides these defaults."""

    model_config = SettingsConfigDict(env_prefix="DREAMWELL_", extra="forbid", frozen=True)

    data_dir: Path = Field(default_factory=default_data_dir)
    transport: Literal["stdio", "sse", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    namespace: str | None = None
    token: str | None = None
    tokens_file: Path | None = None
    stateless_http: bool = False
    wm_ttl_minutes: int = Field(default=5, ge=1, le=10_080)
    wm_max_per_namespace: int = Field(default=50, ge=1, le=10_000)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
    # recall
    embedder: Literal["e5", "minilm", "ollama", "none"] = "e5"
    ollama_embed_model: str = "nomic-embed-text"
    min_similarity: float | None = Field(default=None, ge=-1.0, le=1.0)
    # share of keywords in hybrid ranking: 1 = BM25 only, 0 = vectors only (for measuring);
    # None = tuned per embedder
    keyword_weight: float | None = Field(default=None, ge=0.0, le=1.0)
    # deep search: re-order the top `rerank_depth` hits with the cross-encoder (~20 ms each)
    rerank: bool = False
    rerank_depth: int = Field(default=20, ge=2, le=100)
    # the LLM behind the dream worker (and Ollama embeddings); no host = no LLM
    ollama_host: str | None = None
    ollama_model: str = "llama3.2"
    ollama_timeout: float = Field(default=120.0, gt=0, le=3600)
    # dreaming inside `serve` (off unless set), e.g. "12h", "30m"
    dream_every: str | None = None

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
            if not _TENANT.fullmatch(tenant):
                raise ValueError(f"tenant name {tenant!r} must be 1-64 letters, digits, - or _")
            if len(token) < 8:
                raise ValueError("a bearer token must be at least 8 characters")
        return tokens
