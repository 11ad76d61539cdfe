"""What each setting means and which commands take it as a flag: the one table that
`dreamwell --help`, the Settings model's field descriptions and the README's settings table
are all made from. Plain Python (no pydantic), so parsing the command line stays fast; a test
checks it names exactly the Settings fields."""

from __future__ import annotations

import re
from typing import NamedTuple, TypeAlias

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_every(text: str) -> float:
    """'12h', '30m', '1d', '90s' -> seconds (at least one minute). Plain Python: the hooks
    read `dream_auto_after` with it, without pydantic."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", text)
    if not match or float(match.group(1)) * _UNITS[match.group(2)] < 60:
        raise ValueError(f"'{text}' is not an interval like 30m, 12h or 1d (at least 1m)")
    return float(match.group(1)) * _UNITS[match.group(2)]


COMMANDS = (
    "serve",
    "dream",
    "log",
    "export",
    "import",
    "stats",
    "doctor",
    "ui",
    "reindex",
    "skills",
    "hook",
    "install",
    "config",
)
STORE_COMMANDS = tuple(c for c in COMMANDS if c not in ("hook", "install", "config"))
UI_PORT = 8766  # `ui`'s port unless given: `serve --transport http` takes 8765


Default: TypeAlias = str | int | float | bool | None


class Meta(NamedTuple):
    meaning: str
    commands: tuple[str, ...] = ()  # the commands that take it as `--name-with-dashes`
    shown: str | None = None  # the default in words, where the value misleads or is computed
    switch: bool = False  # a flag without a value (a bool setting)
    choices: tuple[str, ...] = ()  # shown as the flag's metavar
    default: Default = None  # the value Settings starts from (the one place it is defined)
    own: tuple[tuple[str, Default], ...] = ()  # (command, default) where a command differs


SETTINGS: dict[str, Meta] = {
    "data_dir": Meta(
        "everything is stored here, nothing outside it; or an object-store location "
        "`s3://bucket/prefix` (also `gs://`, `az://`) that replicas share",
        COMMANDS,
        "`$XDG_DATA_HOME/dreamwell` or `~/.local/share/dreamwell`",
    ),
    "storage_options": Meta(
        "object-store options as a JSON object (LanceDB's `storage_options`: `endpoint`, "
        "`region`, `allow_http`, keys); the usual `AWS_*` variables work too",
        STORE_COMMANDS,
    ),
    "cache_dir": Meta(
        "where a replica keeps its own derived cache of an object-store `data_dir`",
        STORE_COMMANDS,
        "`$XDG_CACHE_HOME/dreamwell` or `~/.cache/dreamwell`",
    ),
    "store_uri": Meta(
        "the object-store location; set by giving `data_dir` an `s3://` URI (then "
        "`data_dir` is this replica's cache of it)"
    ),
    "transport": Meta(
        "`stdio`, `sse` or `http`", ("serve",), choices=("stdio", "sse", "http"), default="stdio"
    ),
    "host": Meta("bind address of HTTP transports", ("serve",), default="127.0.0.1"),
    "port": Meta(
        "port of HTTP transports; `ui` uses 8766 unless given (0 = any free port)",
        ("serve", "ui"),
        default=8765,
        own=(("ui", UI_PORT),),
    ),
    "namespace": Meta("pin the working-memory namespace, e.g. `patrol/heartbeat`", ("serve",)),
    "token": Meta(
        "bearer token for HTTP transports",
        ("serve",),
        "one made once and kept in `<data_dir>/serve-token` (0600)",
    ),
    "tokens_file": Meta("JSON object of bearer token → tenant", ("serve",)),
    "no_token": Meta(
        "serve HTTP transports without a token, to every local user (unsafe on a shared "
        "machine; 127.0.0.1 only)",
        ("serve",),
        switch=True,
        default=False,
    ),
    "stateless_http": Meta(
        "streamable HTTP without sessions", ("serve",), switch=True, default=False
    ),
    "wm_ttl_minutes": Meta("default working-memory TTL", default=5),
    "wm_max_per_namespace": Meta("working-memory entries per namespace", default=50),
    "log_level": Meta(
        "logs go to stderr",
        ("serve", "dream", "import", "ui"),
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        default="WARNING",
    ),
    "embedder": Meta(
        "`e5` (embedded e5-small-v2, the default), `minilm` (embedded), `ollama` or `none` "
        "(BM25 only); switching re-embeds in the background",
        ("serve", "stats", "doctor"),
        choices=("e5", "minilm", "ollama", "none"),
        default="e5",
    ),
    "ollama_embed_model": Meta(
        "embedding model when `embedder=ollama`", default="nomic-embed-text"
    ),
    "min_similarity": Meta(
        "cosine below this is ignored in hybrid ranking",
        shown="per embedder (e5 0.7, MiniLM 0.2, Ollama 0.5)",
    ),
    "keyword_weight": Meta(
        "share of BM25 in hybrid ranking (1 = keywords only, 0 = vectors only)",
        shown="per embedder (e5 0.4, MiniLM 0.6, Ollama 0.6)",
    ),
    "contextual": Meta(
        "contextual memories: a memory saved within 5 minutes of the same caller's previous "
        "one, in the same category, is also found through its neighbours' words and meaning; "
        "`false` turns it off",
        switch=True,
        default=True,
    ),
    "rerank": Meta(
        "deep search: re-order the top hits with the embedded cross-encoder (~130 ms a search)",
        switch=True,
        default=False,
    ),
    "rerank_depth": Meta("how many top hits the reranker re-orders", default=20),
    "ollama_host": Meta(
        "Ollama: embeddings with `embedder=ollama`, and the dream's LLM when `llm_base_url` is "
        "unset (no LLM at all: the LLM passes are skipped)",
        ("dream", "doctor", "ui"),
    ),
    "ollama_model": Meta(
        "the dream's model on Ollama when `llm_model` is unset", ("dream", "ui"), default="llama3.2"
    ),
    "ollama_timeout": Meta("seconds per Ollama embedding call", default=120.0),
    "llm_provider": Meta(
        "the dream's LLM API: `ollama`, `openai` for any OpenAI-compatible endpoint "
        "(LM Studio, llama.cpp, vLLM, LocalAI, hosted), or `claude-code`: each question one "
        "`claude -p` on the user's own Claude login (no hooks, MCP servers, tools or sessions)",
        ("serve", "dream", "doctor", "ui", "hook"),
        choices=("ollama", "openai", "claude-code"),
        default="ollama",
    ),
    "llm_base_url": Meta(
        "the LLM endpoint, e.g. `http://127.0.0.1:8081/v1` (ollama: falls back to `ollama_host`)",
        ("serve", "dream", "doctor", "ui"),
    ),
    "llm_model": Meta(
        "the LLM model (required with `openai`; ollama: falls back to `ollama_model`; "
        "claude-code: `haiku` unless set)",
        ("serve", "dream", "doctor", "ui", "hook"),
    ),
    "llm_api_key": Meta(
        "API key sent as a bearer token; never logged or shown", ("serve", "dream", "doctor", "ui")
    ),
    "llm_timeout": Meta("seconds per LLM call (CPU-sized)", default=600.0),
    "llm_context": Meta("context window asked of Ollama (`num_ctx`)", default=8192),
    "llm_max_tokens": Meta(
        "output limit per LLM answer (`num_predict` / `max_tokens`)", default=2048
    ),
    "claude_path": Meta(
        "the `claude` program `llm_provider=claude-code` runs (a name on PATH or a path)",
        ("serve", "dream", "doctor", "ui", "hook"),
        default="claude",
    ),
    "dream_budget_tokens": Meta(
        "a dream cycle's LLM spend, input + output tokens: the LLM passes left when it is "
        "spent are skipped and named in the report",
        ("serve", "dream", "ui", "hook"),
        default=200_000,
    ),
    "record_conversation": Meta(
        "record the user messages the `recall` prompt receives (per caller, newest ~4 MiB) as "
        "the conversation log the dream reads, and the client hooks' user turns; `false` turns "
        "both off",
        switch=True,
        default=True,
    ),
    "hook_max_chars": Meta(
        "characters a client hook (`dreamwell hook`) adds to the context at most, per event",
        default=6000,
    ),
    "hook_session_chars": Meta(
        "characters the client hooks add to one session's context at most, across its "
        "prompts (counted again after `/clear` or a compaction)",
        default=4000,
    ),
    "enrich": Meta(
        "with an LLM configured, expand saved memories into atomic facts in the background "
        "(reported and undoable like a dream); `false` turns it off",
        switch=True,
        default=True,
    ),
    "dream_every": Meta("dream inside `serve` on a timer, e.g. `12h`", ("serve",)),
    "dream_auto": Meta(
        "a session end (the `session-end` hook) or a `serve` idle for 10 minutes starts one "
        "detached `dreamwell dream --once` at the lowest CPU priority, when the last cycle is "
        "older than `dream_auto_after` and `dream_auto_sessions` sessions were recorded since; "
        "`false` turns it off",
        switch=True,
        default=True,
    ),
    "dream_auto_after": Meta(
        "the least time between two dreams that start by themselves, e.g. `24h`",
        ("serve", "hook"),
        default="24h",
    ),
    "dream_auto_sessions": Meta(
        "client sessions recorded since the last cycle before a dream starts by itself",
        ("serve", "hook"),
        default=5,
    ),
    "skills_auto_approve": Meta(
        "skills the dream creates are served at once instead of waiting as candidates for "
        "`dreamwell skills approve`",
        ("serve", "dream"),
        switch=True,
        default=False,
    ),
    "project": Meta(
        "pin the project memories are saved in and recalled from: a directory (its git "
        "repository) or a key; unset, each call's project comes from the client's roots, a "
        "hook's `cwd` or the server's working directory",
        ("serve",),
    ),
    "global_categories": Meta(
        "comma-separated categories whose memories are global (seen from every project) "
        "besides `user-preferences`, `preferences`, `anti-patterns` and `people`",
        shown="none",
        default="",
    ),
}


def default_of(name: str, command: str | None = None) -> Default:
    """Setting `name`'s default, as `command` uses it when not given."""
    meta = SETTINGS[name]
    return dict(meta.own).get(command, meta.default) if command else meta.default


def shown_default(name: str, command: str | None = None) -> str:
    """Setting `name`'s default in the words `--help` and the README show: the value itself,
    a boolean as on/off (what DREAMWELL_* also accepts), None as "not set"."""
    meta = SETTINGS[name]
    value = default_of(name, command)
    if meta.shown is not None and value == meta.default:
        return meta.shown.replace("`", "")
    if isinstance(value, bool):
        return "on" if value else "off"
    return "not set" if value is None else str(value)


def flag_for(name: str) -> tuple[str, ...]:
    """The commands that take setting `name` as a flag."""
    return SETTINGS[name].commands


def settings_of(command: str) -> list[str]:
    return [name for name, meta in SETTINGS.items() if command in meta.commands]
