"""The memory browser sees every project (docs/projects.md): each memory carries its project, the
categories answer counts the memories per project, and the list filters by one project or
by the global memories."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from dreamwell.server.config import Settings
from dreamwell.server.runtime import Runtime
from dreamwell.stores import PROJECT, PROJECT_NAME, LongTermStore
from tests.support.servers import http_server

pytestmark = pytest.mark.anyio

SHOP = {PROJECT: "github.com/acme/shop", PROJECT_NAME: "shop"}


async def test_the_browser_shows_and_filters_memories_by_project(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "d", embedder="none", transport="http", port=0)
    store = LongTermStore(tmp_path / "d", embedder=None)
    mine = store.save("Deploy with make ship", metadata=SHOP).entry
    other = store.save("Deploy with kubectl", metadata={PROJECT: "github.com/acme/billing"}).entry
    shared = store.save("Prefers short deploy notes", "user-preferences/style").entry
    async with http_server(settings, Runtime(settings)) as url, httpx2.AsyncClient() as http:
        cats = (await http.get(f"{url}/ui/api/categories")).json()
        assert cats["projects"] == [
            {"project": "github.com/acme/billing", "name": "billing", "count": 1},
            {"project": "github.com/acme/shop", "name": "shop", "count": 1},
        ]
        assert cats["global"] == 1

        async def listed(**params: str) -> list[str]:
            found = (await http.get(f"{url}/ui/api/memories", params=params)).json()
            return [m["id"] for m in found["memories"]]

        everything = (await http.get(f"{url}/ui/api/memories")).json()["memories"]
        assert {m["id"]: m["metadata"].get(PROJECT) for m in everything}[mine.id] == SHOP[PROJECT]
        assert await listed(project=SHOP[PROJECT]) == [mine.id]
        assert await listed(project=SHOP[PROJECT], q="deploy") == [mine.id]
        assert await listed(project="(global)") == [shared.id]
        assert set(await listed(q="deploy")) == {mine.id, other.id, shared.id}
