"""A skill imported on one replica is announced on another replica's connections: two
`serve --transport http` servers on one object-store location (SeaweedFS on 127.0.0.1), each
with its own cache directory; `dreamwell skills import` run as a user runs it, on a third
cache directory. The client of server B must hear prompts/resources list_changed within
2 s (docs/skills.md) and then list the new skill: B's watch polls the manifest's version (a HEAD)
and nothing on B's disk moved."""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged

from dreamwell.server.cli.main import attach_remote
from dreamwell.server.config import Settings
from tests.support.cli import dreamwell
from tests.support.notify import BOUND, SLACK, Recorder, http_client
from tests.support.s3server import SeaweedS3
from tests.support.servers import http_server
from tests.support.skill_samples import simple_md, write_skill

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::ResourceWarning")]


def replica_settings(s3: SeaweedS3, prefix: str, cache: Path) -> Settings:
    settings = Settings(
        data_dir=s3.uri(prefix),
        cache_dir=cache,
        storage_options=s3.storage_options,
        transport="http",
        port=0,
        embedder="none",
    )
    attach_remote(settings)
    return settings


def cli_import(s3: SeaweedS3, prefix: str, cache: Path, folder: Path) -> None:
    env = {
        "DREAMWELL_CACHE_DIR": str(cache),
        "DREAMWELL_STORAGE_OPTIONS": json.dumps(s3.storage_options),
    }
    done = dreamwell("skills", "import", str(folder), "--data-dir", s3.uri(prefix), env=env)
    assert done.returncode == 0, done.stderr


async def heard(recorder: Recorder, mode: str, sub: object) -> None:
    if mode == "legacy":
        await recorder.changed.wait()
        return
    kinds: set[type] = set()
    async for event in sub:  # type: ignore[attr-defined]
        kinds.add(type(event))
        if kinds >= {PromptsListChanged, ResourcesListChanged}:
            return


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_import_on_one_replica_is_announced_on_another(
    s3: SeaweedS3, s3_prefix: str, tmp_path: Path, mode: str
) -> None:
    a = replica_settings(s3, s3_prefix, tmp_path / "cache-a")
    b = replica_settings(s3, s3_prefix, tmp_path / "cache-b")
    folder = write_skill(tmp_path / "src", "tea", simple_md("tea", "brew green tea"))
    recorder = Recorder()
    async with (
        http_server(a) as url_a,
        http_server(b) as url_b,
        http_client(url_a, mode, Recorder()) as on_a,
        http_client(url_b, mode, recorder) as on_b,
    ):
        assert "tea" not in {p.name for p in (await on_b.list_prompts()).prompts}
        listening = (
            nullcontext(None)
            if mode == "legacy"
            else on_b.listen(prompts_list_changed=True, resources_list_changed=True)
        )
        async with listening as sub:
            await anyio.to_thread.run_sync(
                cli_import, s3, s3_prefix, tmp_path / "cache-cli", folder
            )
            written = time.monotonic()  # the import's commit was before its process ended
            with anyio.fail_after(BOUND + SLACK):
                await heard(recorder, mode, sub)
        assert time.monotonic() - written < BOUND + SLACK
        assert "tea" in {p.name for p in (await on_b.list_prompts()).prompts}
        with anyio.fail_after(BOUND + SLACK):  # A reads within its catalog's freshness
            while "tea" not in {p.name for p in (await on_a.list_prompts()).prompts}:
                await anyio.sleep(0.05)
    assert not (b.data_dir / "skills" / ".generation").exists()  # heard from the store alone
