"""The dream worker at the MCP edge: the `dream` prompt, report resources, the `dreamwell
dream` command, and the opt-in timer inside `serve`."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Annotated

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import Field

from dreamwell.dream import LLM, DreamBusy, DreamOptions, render, run_cycle, undo
from dreamwell.dream.llm import make_llm
from dreamwell.dream.report import list_reports, load_report
from dreamwell.server.config import Settings, parse_every
from dreamwell.server.runtime import CURRENT_REQUEST, Runtime, Tenant
from dreamwell.stores import StoreError

logger = logging.getLogger(__name__)


NO_LLM = "no LLM configured (set llm_base_url, or ollama_host for Ollama)"


def llm_for(settings: Settings) -> LLM | None:
    """The dream's LLM from the llm_* settings; Ollama's old ollama_host/ollama_model still
    work. None when no endpoint is configured."""
    ollama = settings.llm_provider == "ollama"
    base = settings.llm_base_url or (settings.ollama_host if ollama else None)
    if not base:
        return None
    model = settings.llm_model or (settings.ollama_model if ollama else None)
    if not model:
        raise ValueError("llm_model is required with llm_provider=openai")
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    return make_llm(
        settings.llm_provider,
        base,
        model,
        settings.llm_timeout,
        key,
        max_tokens=settings.llm_max_tokens,
        context=settings.llm_context,
    )


def dream_once(
    tenant: Tenant, settings: Settings, dry_run: bool, options: DreamOptions | None = None
) -> str:
    llm = llm_for(settings)
    report = run_cycle(tenant.longterm, llm, dry_run=dry_run, options=options, no_llm_reason=NO_LLM)
    return render(report)


def register_dream(mcp: MCPServer[Runtime], runtime: Runtime) -> None:
    @mcp.prompt(
        description="Refine long-term memory now: apply=no (default) shows the plan, "
        "apply=yes runs it and reports."
    )
    async def dream(
        apply: Annotated[str, Field(description="'yes' to change memory, else a preview")] = "no",
    ) -> str:
        if apply.strip().lower() not in ("yes", "no", "y", "n", "true", "false", ""):
            raise MCPError(INVALID_PARAMS, f"apply must be yes or no; got {apply!r}")
        tenant = await _caller_tenant(runtime)
        dry = apply.strip().lower() not in ("yes", "y", "true")
        try:  # the caller asked for it: no waiting for quiet
            return await anyio.to_thread.run_sync(
                dream_once, tenant, runtime.settings, dry, DreamOptions(quiet_seconds=0)
            )
        except (DreamBusy, StoreError) as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from exc

    @mcp.resource("dream://reports", description="Dream cycles run on this memory, newest first")
    async def reports() -> str:
        tenant = await _caller_tenant(runtime)
        runs = list_reports(tenant.data_dir)
        if not runs:
            return "No dream cycles yet."
        return "Dream reports (read dream://reports/{run}):\n" + "\n".join(f"- {r}" for r in runs)

    @mcp.resource("dream://reports/{run}", description="What one dream cycle changed")
    async def report(run: str) -> str:
        tenant = await _caller_tenant(runtime)
        try:
            return render(load_report(tenant.data_dir, run))
        except KeyError as exc:
            raise ResourceNotFoundError(str(exc.args[0])) from exc


async def _caller_tenant(runtime: Runtime) -> Tenant:
    """The stores of the caller's tenant (with bearer tokens, each token has its own)."""
    try:
        tenant_name, _ = runtime.caller(CURRENT_REQUEST.get())
        return await runtime.tenant(tenant_name)
    except StoreError as exc:
        raise MCPError(INVALID_PARAMS, str(exc)) from exc


async def dream_forever(runtime: Runtime, period: float | None = None) -> None:
    """`dream_every` inside `serve`: one cycle per interval on every open tenant."""
    period = period or parse_every(runtime.settings.dream_every or "")
    while True:
        await anyio.sleep(period)
        for tenant in runtime.opened():
            try:
                text = await anyio.to_thread.run_sync(dream_once, tenant, runtime.settings, False)
                logger.info("%s", text)
            except DreamBusy as exc:
                logger.info("dream skipped: %s", exc)
            except Exception:  # the server outlives a failed cycle
                logger.exception("dream cycle failed")


def run_dream_command(args: argparse.Namespace, settings: Settings) -> int:
    """`dreamwell dream`: --once [--dry-run], --every, --report [RUN], --undo RUN."""
    runtime = Runtime(settings)
    tenant = runtime.open_tenant("")
    out = sys.stdout
    try:
        if args.report is not None:
            runs = list_reports(tenant.data_dir)
            run = args.report or (runs[0] if runs else "")
            out.write(
                (render(load_report(tenant.data_dir, run)) if run else "No dream cycles yet.")
                + "\n"
            )
        elif args.undo:
            out.write(render(undo(tenant.longterm, args.undo)) + "\n")
        elif args.once:
            out.write(dream_once(tenant, settings, args.dry_run) + "\n")
        else:
            period = parse_every(args.every)
            while True:
                try:
                    out.write(dream_once(tenant, settings, False) + "\n")
                except DreamBusy as exc:
                    sys.stderr.write(f"dreamwell: {exc}\n")
                out.flush()
                anyio.run(anyio.sleep, period)
    except (KeyError, ValueError, DreamBusy) as exc:
        sys.stderr.write(f"dreamwell: {exc.args[0] if exc.args else exc}\n")
        return 1
    return 0
