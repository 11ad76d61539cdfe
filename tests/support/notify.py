"""Hearing a skill change announced: a client's message handler that records the list_changed
notifications, and an MCP client over streamable HTTP with it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

WANTED = {"notifications/prompts/list_changed", "notifications/resources/list_changed"}


BOUND = 2.0  # docs/skills.md: within 2 s


SLACK = 3.0  # what a loaded machine may add to the bound before the test gives up


class Recorder:
    """A client's message handler that records the notifications it receives."""

    def __init__(self) -> None:
        self.methods: list[str] = []
        self.changed = anyio.Event()

    async def __call__(self, message: Any) -> None:
        method = getattr(message, "method", None) or getattr(
            getattr(message, "root", None), "method", None
        )
        if isinstance(method, str):
            self.methods.append(method)
            if set(self.methods) >= WANTED:
                self.changed.set()


@asynccontextmanager
async def http_client(
    url: str, mode: str, recorder: Recorder, token: str | None = None
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(timeout=30, headers=headers) as client:
        transport = streamable_http_client(f"{url}/mcp", http_client=client)
        async with Client(transport, mode=mode, message_handler=recorder) as c:  # type: ignore[arg-type]
            yield c
