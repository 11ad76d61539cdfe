"""The client's own model for the dream (docs/claude-code.md): with no LLM configured, the `dream`
prompt asks the model of the client that invoked it, through MCP `sampling/createMessage`.

`SamplingLLM` is a backend of the dream's `LLM` protocol (dream/llm.py), so the passes ask it
the same questions with the same schemas, host rules and conflict checks as an HTTP model;
the dream layer never sees MCP. The dream runs in a worker thread: each question is sent on
the event loop of the prompt's request (anyio's thread portal) and the thread waits for the
client's answer. Only connections with a back-channel can be asked mid-request: the
initialize-handshake eras (2025-11-25 and before). On 2026-07-28 connections sampling is a
request-scoped round trip that a multi-step dream cannot pause for; `check` says so and the
dream runs its passes that need no LLM.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

import anyio
import anyio.from_thread
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.types import SamplingMessage, TextContent
from mcp_types.version import is_version_at_least

from dreamwell.dream.llm import BadAnswer, LLMCancelled, LLMUnavailable
from dreamwell.server.dream_llm import CONFIGURE_LLM
from dreamwell.server.mcp.handshake import MODERN

HOW_TO_CONFIGURE = f"configure one ({CONFIGURE_LLM}), or use a client that offers MCP sampling"


def offers_sampling(ctx: Context) -> bool:
    """Whether the client that sent this request declared the `sampling` capability."""
    caps = ctx.client_capabilities
    return caps is not None and caps.sampling is not None


def without_sampling_note() -> str:
    return f"No LLM is configured and this client does not offer sampling: {HOW_TO_CONFIGURE}."


class SamplingLLM:
    """Asks the invoking client's model; every failure is an LLMError, as for HTTP models."""

    def __init__(self, ctx: Context, max_tokens: int, timeout: float) -> None:
        self._session = ctx.session
        self._request_id = ctx.request_id
        self._version = ctx.protocol_version
        self._max_tokens = max_tokens
        self._timeout = timeout
        params = getattr(self._session, "client_params", None)
        info = getattr(params, "client_info", None) or getattr(params, "clientInfo", None)
        self._client = str(getattr(info, "name", "") or "the client")

    @property
    def name(self) -> str:
        return f"sampling:{self._client}"

    def check(self) -> None:
        if self._version is not None and is_version_at_least(self._version, MODERN):
            raise LLMUnavailable(
                f"this connection (protocol {self._version}) cannot ask the client's model in "
                f"the middle of a dream; {HOW_TO_CONFIGURE}"
            )

    def ask(
        self,
        system: str,
        prompt: str,
        schema: dict[str, Any],
        cancel: threading.Event | None = None,
    ) -> str:
        """The client model's text answer (the JSON shape is in `prompt`; `ask_for` checks
        it against `schema`)."""
        if cancel is not None and cancel.is_set():
            raise LLMCancelled("cancelled")
        try:
            text = anyio.from_thread.run(self._ask, system, prompt)
        except TimeoutError as exc:
            raise LLMUnavailable(
                f"{self._client} did not answer the sampling request within {self._timeout:.0f} s"
            ) from exc
        except MCPError as exc:  # the user declined, no model, no back-channel
            raise LLMUnavailable(f"{self._client} refused the sampling request: {exc}") from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, RuntimeError) as exc:
            raise LLMUnavailable(f"the connection to {self._client} is gone ({exc})") from exc
        if cancel is not None and cancel.is_set():
            raise LLMCancelled("cancelled")
        return text

    async def _ask(self, system: str, prompt: str) -> str:
        message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
        with warnings.catch_warnings():  # SEP-2577 deprecates sampling for 2026-07-28 only
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            asked = self._session.create_message(
                messages=[message],
                system_prompt=system,
                max_tokens=self._max_tokens,
                related_request_id=self._request_id,
            )
        with anyio.fail_after(self._timeout):
            result = await asked
        content = result.content
        if not isinstance(content, TextContent):
            raise BadAnswer(f"{self._client} answered with {content.type} content, not text")
        return content.text
