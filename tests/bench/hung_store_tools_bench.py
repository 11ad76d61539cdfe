"""Reads through the tools while the object store hangs (not collected by pytest): issue 53's
"searches still wait on a hung object store through the tools" (QA: search with hits 10.0 s,
without 26.1 s, beside a pending save 31.8 s).

    python tests/bench/hung_store_tools_bench.py [--embedder none|e5]

A local SeaweedFS is started (and stopped at the end). Two `serve --transport http
--stateless-http` replicas share it; replica A saves 20 memories, B saves one (news for A),
then the store is frozen (SIGSTOP) and each read is made through a fresh MCP client of A, as
a load balancer's clients would: search with hits, without, categories, the recall prompt;
then the same beside a save that waits on the store. Prints each read's seconds, whether it
said it was answered from memory, and the load average.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.support

from dreamwell.server.cli.main import attach_remote
from dreamwell.server.config import Settings
from tests.support.s3server import SeaweedS3
from tests.support.servers import http, http_server

STALE = "the store is not responding"


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def replica(s3: SeaweedS3, root: Path, name: str, embedder: str) -> Settings:
    settings = Settings(
        data_dir=s3.uri("bench"),  # type: ignore[arg-type]
        cache_dir=root / name,
        storage_options=s3.storage_options,
        embedder=embedder,  # type: ignore[arg-type]
        transport="http",
        port=0,
        stateless_http=True,
    )
    attach_remote(settings)
    return settings


def text_of(result: Any) -> str:
    if hasattr(result, "messages"):
        return str(result.messages[0].content.text)
    return str(result.content[0].text)


async def timed(label: str, make: Callable[[], Awaitable[Any]]) -> None:
    began = time.monotonic()
    try:
        text = text_of(await make())
    except Exception as exc:  # a bench reports what happened, whatever it was
        text = f"FAILED: {exc}"
    said = "says so" if STALE in text else "-"
    say(f"{label:32s} {time.monotonic() - began:6.2f} s  {said:8s} {text.splitlines()[0][:60]}")


async def bench(s3: SeaweedS3, root: Path, embedder: str) -> None:
    a, b = replica(s3, root, "a", embedder), replica(s3, root, "b", embedder)
    async with http_server(a) as url, http_server(b) as url_b:

        async def tool(u: str, name: str, **args: Any) -> Any:
            async with http(u) as client:
                return await client.call_tool(name, args)

        async def recall(message: str) -> Any:
            async with http(url) as client:
                return await client.get_prompt("recall", {"message": message})

        for i in range(20):
            note = f"deploy note {i} about the staging cluster"
            await tool(url, "save_memory", content=note, category=f"ops/{i % 3}")
        await timed(
            "search with hits (healthy)", lambda: tool(url, "search_memory", query="staging")
        )
        await tool(url_b, "save_memory", content="news from replica b", category="ops/0")
        s3.freeze()
        say(f"frozen (load {loadavg()})")
        try:
            await anyio.sleep(2.5)  # the replica has heard nothing for a while
            await timed("search with hits", lambda: tool(url, "search_memory", query="staging"))
            await timed("search without hits", lambda: tool(url, "search_memory", query="zebra"))
            await timed("list_memory_categories", lambda: tool(url, "list_memory_categories"))
            await timed("recall prompt", lambda: recall("staging cluster deploys"))
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    timed,
                    "save (waits on the store)",
                    lambda: tool(url, "save_memory", content="x"),
                )
                await anyio.sleep(0.3)
                await timed(
                    "search beside the save", lambda: tool(url, "search_memory", query="staging")
                )
                await timed(
                    "no hits beside the save", lambda: tool(url, "search_memory", query="zebra")
                )
                await timed(
                    "categories beside the save", lambda: tool(url, "list_memory_categories")
                )
                await timed("recall beside the save", lambda: recall("deploy note"))
        finally:
            s3.thaw()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default="none", choices=["none", "e5"])
    args = parser.parse_args()
    say(f"load before: {loadavg()}")
    with tempfile.TemporaryDirectory() as tmp, SeaweedS3(bucket="hung-tools") as s3:
        anyio.run(bench, s3, Path(tmp), args.embedder)
    say(f"load after: {loadavg()}")


if __name__ == "__main__":
    main()
