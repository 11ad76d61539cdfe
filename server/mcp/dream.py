"""The dream at the MCP edge: the `dream` prompt (a cycle through server/dreaming.py, with the
client's own model through sampling when no LLM is configured) and the report resources."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import Field

from dreamwell.server.config import Settings
from dreamwell.server.dream_llm import NO_LLM, llm_configured
from dreamwell.server.dreaming import dream_in_thread
from dreamwell.server.mcp.projects import caller_project
from dreamwell.server.mcp.reports import caller_tenant, register_reports
from dreamwell.server.runtime import Runtime
from dreamwell.stores import StoreError

if TYPE_CHECKING:
    from dreamwell.dream import LLM


def register_dream(mcp: MCPServer[Runtime], runtime: Runtime) -> None:
    """The `dream` prompt and the report resources."""
    _register_prompt(mcp, runtime)
    register_reports(mcp, runtime)


def _register_prompt(mcp: MCPServer[Runtime], runtime: Runtime) -> None:
    @mcp.prompt(
        description="Refine long-term memory now: apply=no (default) shows the plan, "
        "apply=yes runs it and reports."
    )
    async def dream(
        ctx: Context,
        apply: Annotated[str, Field(description="'yes' to change memory, else a preview")] = "no",
    ) -> str:
        if apply.strip().lower() not in ("yes", "no", "y", "n", "true", "false", ""):
            raise MCPError(INVALID_PARAMS, f"apply must be yes or no; got {apply!r}")
        from dreamwell.dream import DreamBusy, DreamCancelled

        tenant = await caller_tenant(runtime)
        dry = apply.strip().lower() not in ("yes", "y", "true")
        try:  # the caller asked for it: no waiting for quiet
            client_llm, note = _client_model(ctx, runtime.settings)
            reason = f"{NO_LLM}; this client does not offer sampling" if note else NO_LLM
            project = await caller_project(runtime, ctx)
            key = project.key if project is not None else None
            text = await dream_in_thread(
                tenant, runtime.settings, dry, 0, client_llm, reason, project=key
            )
        except (DreamBusy, DreamCancelled, StoreError, ValueError) as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from exc
        return f"{text}\n\n{note}" if note else text


def _client_model(ctx: Context, settings: Settings) -> tuple[LLM | None, str]:
    """(the invoking client's model when no LLM is configured and the client offers
    sampling, a note for the caller when it does not)."""
    if llm_configured(settings):
        return None, ""
    from dreamwell.server.mcp.sampling import SamplingLLM, offers_sampling, without_sampling_note

    if offers_sampling(ctx):
        return SamplingLLM(ctx, settings.llm_max_tokens, settings.llm_timeout), ""
    return None, without_sampling_note()
