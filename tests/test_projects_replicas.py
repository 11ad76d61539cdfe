"""A team on shared replicas (docs/beyond-one-machine.md, docs/projects.md): two replicas on one
object-store location, two users with their own clones of one repository (one cloned over ssh, one
over https, in different folders): they share that project's memories, and neither sees the other's
other projects."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
import pytest

from tests.support.calls import ok
from tests.support.replicas import SAVED, Replica, client
from tests.support.repos import Roots, make_repo
from tests.support.s3server import SeaweedS3

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::ResourceWarning")]


async def _save(url: str, roots: Roots, content: str) -> str:
    async with client(url, roots=roots) as c:
        found = SAVED.search(await ok(c, "save_memory", content=content))
    assert found
    return found.group(1)


async def test_two_clones_on_two_replicas_share_their_project_and_nothing_else(
    s3: SeaweedS3, tmp_path: Path
) -> None:
    alice_shop = make_repo(tmp_path / "alice" / "shop", {"origin": "git@github.com:acme/shop.git"})
    bob_shop = make_repo(
        tmp_path / "bob" / "work" / "code", {"origin": "https://github.com/acme/shop"}
    )
    alice_side = make_repo(tmp_path / "alice" / "side", {"origin": "git@github.com:alice/side.git"})
    prefix = f"teams-{uuid.uuid4().hex[:8]}"
    one, two = (Replica(s3, prefix, tmp_path / f"replica{i}") for i in range(2))
    try:
        for r in (one, two):
            r.start(wait=False)
        for r in (one, two):
            r.wait_ready()
        shared = await _save(one.url, Roots(alice_shop), "Deploy the shop with make ship-it")
        private = await _save(one.url, Roots(alice_side), "Deploy my side project with fly deploy")
        async with client(two.url, roots=Roots(bob_shop)) as bob:
            # another replica's write reaches this one (docs/beyond-one-machine.md: 2 s)
            with anyio.fail_after(30):
                while shared not in (found := await ok(bob, "search_memory", query="deploy")):
                    await anyio.sleep(0.05)
            assert private not in found
            mine = SAVED.search(
                await ok(bob, "save_memory", content="Run the shop's tests with make test")
            )
        assert mine
        async with client(one.url, roots=Roots(alice_shop)) as alice:
            with anyio.fail_after(30):
                while mine.group(1) not in await ok(alice, "search_memory", query="tests"):
                    await anyio.sleep(0.05)
    finally:
        for r in (one, two):
            r.stop()
