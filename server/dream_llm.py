"""The dream's LLM from the settings, for every command and server that dreams: which one
(`llm_for`; Claude Code's `claude -p` for `llm_provider=claude-code`), whether one is
configured, a cycle's options from the settings, and the one wording of how to configure one
that every "no LLM" hint gives (the dream's output, its prompt, `doctor`).

Imports no LLM client until one is asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dreamwell.server.config import Settings

if TYPE_CHECKING:
    from dreamwell.dream import LLM, DreamOptions

# the whole configuration, for every "no LLM" hint (doctor, the dream's output, its prompt)
CONFIGURE_LLM = (
    "with Claude Code: dreamwell install claude-code --dream (or --llm-provider claude-code "
    "[--llm-model haiku]); an OpenAI-compatible endpoint: llm_provider=openai + llm_model + "
    "llm_base_url (+ llm_api_key); Ollama: llm_provider=ollama + llm_model + llm_base_url "
    "(or ollama_host)"
)
NO_LLM = "no LLM configured"  # each skipped pass's reason; the hint comes once, after it
NO_LLM_HINT = f"No LLM is configured, so the LLM passes were skipped: {CONFIGURE_LLM}."


def llm_configured(settings: Settings) -> bool:
    """Whether the settings name an LLM for the dream (checked without importing it)."""
    return settings.llm_provider == "claude-code" or llm_endpoint(settings) is not None


def dream_options(settings: Settings, **more: Any) -> DreamOptions:
    """A cycle's options from the settings (the budget, skills' approval) and `more`."""
    from dreamwell.dream import DreamOptions

    return DreamOptions(
        skills_auto_approve=settings.skills_auto_approve,
        budget_tokens=settings.dream_budget_tokens,
        **more,
    )


def llm_endpoint(settings: Settings) -> tuple[str, str] | None:
    """(base URL, model) of the dream's HTTP LLM, None when no endpoint is configured (or
    the LLM is Claude Code); checked without importing the LLM client."""
    if settings.llm_provider == "claude-code":
        return None
    ollama = settings.llm_provider == "ollama"
    base = settings.llm_base_url or (settings.ollama_host if ollama else None)
    if not base:
        return None
    model = settings.llm_model or (settings.ollama_model if ollama else None)
    if not model:
        raise ValueError("llm_model is required with llm_provider=openai")
    return base, model


def llm_for(settings: Settings) -> LLM | None:
    """The dream's LLM from the llm_* settings; Ollama's old ollama_host/ollama_model still
    work. None when no endpoint is configured."""
    if settings.llm_provider == "claude-code":
        from dreamwell.dream import ClaudeCodeLLM

        # one answer's time-out: llm_timeout, at most 120 s (ClaudeCodeLLM.MAX_TIMEOUT)
        return ClaudeCodeLLM(
            settings.claude_path,
            settings.llm_model,
            settings.llm_timeout,
            max_tokens=settings.llm_max_tokens,
        )
    endpoint = llm_endpoint(settings)
    if endpoint is None:
        return None
    from dreamwell.dream import make_llm

    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    return make_llm(
        settings.llm_provider,
        *endpoint,
        settings.llm_timeout,
        key,
        max_tokens=settings.llm_max_tokens,
        context=settings.llm_context,
    )
