"""Settings: the one place that reads environment variables (prefix DREAMWELL_)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
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
    embedder: Literal["minilm", "ollama", "none"] = "minilm"
    ollama_embed_model: str = "nomic-embed-text"
    min_similarity: float | None = Field(default=None, ge=-1.0, le=1.0)
    # share of keywords in hybrid ranking: 1 = BM25 only, 0 = vectors only (for measuring)
    keyword_weight: float = Field(default=0.6, ge=0.0, le=1.0)
    # Ollama: embeddings, and the dream's LLM when llm_base_url is unset; no host = no LLM
    ollama_host: str | None = None
    ollama_model: str = "llama3.2"
    ollama_timeout: float = Field(default=120.0, gt=0, le=3600)
    # the dream's LLM: ollama (Ollama's API) or openai (any OpenAI-compatible chat endpoint:
    # LM Studio, llama.cpp's server, vLLM, LocalAI, hosted APIs); the key is never shown
    llm_provider: Literal["ollama", "openai"] = "ollama"
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: SecretStr | None = None
    llm_timeout: float = Field(default=600.0, gt=0, le=7200)  # per call; CPU models are slow
    llm_context: int = Field(default=8192, ge=512, le=1_048_576)  # Ollama num_ctx
    llm_max_tokens: int = Field(default=2048, ge=16, le=131_072)  # num_predict / max_tokens
    # dreaming inside `serve` (off unless set), e.g. "12h", "30m"
    dream_every: str | None = None

    @field_validator("dream_every")
    @classmethod
    def _interval(cls, value: str | None) -> str | None:
        if value is not None:
            parse_every(value)
        return value

    @field_validator("llm_base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"https?://[^\s/]+(/\S*)?", value):
            raise ValueError("must be an http:// or https:// URL, e.g. http://127.0.0.1:1234/v1")
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
