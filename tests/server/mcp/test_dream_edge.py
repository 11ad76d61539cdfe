"""The dream worker through its real interfaces: the MCP prompt and resources, and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.stores import LongTermStore
from tests.support.cli import NO_EMBEDDER, dreamwell, exit_code

pytestmark = pytest.mark.anyio


async def prompt_text(client: Client, apply: str | None = None) -> str:
    result = await client.get_prompt("dream", {} if apply is None else {"apply": apply})
    return result.messages[0].content.text  # type: ignore[union-attr]


async def test_the_dream_prompt_previews_by_default_and_applies_when_asked(tmp_path: Path) -> None:
    async with Client(build_server(Settings(data_dir=tmp_path, embedder="none"))) as c:
        await c.call_tool("save_memory", {"content": "Prefers metric units", "category": "u"})
        preview = await prompt_text(c)
        assert preview.startswith("Dream plan (dry run: nothing was changed)")
        assert "consolidation: skipped (no LLM: no LLM configured" in preview
        assert (
            "--llm-provider claude-code" in preview and "llm_provider=openai + llm_model" in preview
        )
        report = await prompt_text(c, "yes")
        assert report.startswith("Dream report ")
        listing = await c.read_resource("dream://reports")
        text = listing.contents[0].text  # type: ignore[union-attr]
        runs = [line[2:] for line in text.splitlines() if line.startswith("- ")]
        assert len(runs) == 2
        shown = {
            (await c.read_resource(f"dream://reports/{run}")).contents[0].text[:11]  # type: ignore[union-attr]
            for run in runs
        }
        assert shown == {"Dream plan ", "Dream repor"}
        with pytest.raises(MCPError):
            await c.read_resource("dream://reports/nope")
        with pytest.raises(MCPError, match="apply must be yes or no"):
            await prompt_text(c, "maybe")


def test_the_cli_dreams_reports_undoes_and_logs(tmp_path: Path) -> None:
    data = str(tmp_path)
    store = LongTermStore(tmp_path)
    store.save("Standup at 9:30", "work")
    store.save("standup at 9:30!", "play")
    logged = dreamwell(
        "log",
        "feedback",
        "don't guess the timezone",
        "--data-dir",
        data,
        "--session",
        "s1",
        "--kind",
        "Correction",
        env=NO_EMBEDDER,
    )
    assert logged.returncode == 0, logged.stderr
    assert (tmp_path / "feedback.jsonl").read_text().count("Correction") == 1
    once = dreamwell("dream", "--once", "--data-dir", data, env=NO_EMBEDDER)
    assert once.returncode == 0, once.stderr
    run = once.stdout.split()[2]
    assert "anti-patterns: skipped (no LLM" in once.stdout
    shown = dreamwell("dream", "--report", "--data-dir", data, env=NO_EMBEDDER)
    assert shown.stdout.startswith(f"Dream report {run}")
    undone = dreamwell("dream", "--undo", run, "--data-dir", data, env=NO_EMBEDDER)
    assert undone.returncode == 0 and "Undone at" in undone.stdout
    again = dreamwell("dream", "--undo", run, "--data-dir", data, env=NO_EMBEDDER)
    assert again.returncode == 1 and "already undone" in again.stderr
    bad = dreamwell("dream", "--report", "../../etc/passwd", "--data-dir", data, env=NO_EMBEDDER)
    assert bad.returncode == 1 and "no dream report" in bad.stderr


def test_dream_once_without_an_llm_says_once_how_to_configure_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_code("dream", "--once", "--data-dir", str(tmp_path), "--ollama-host", "") == 0
    out = capsys.readouterr().out
    assert "LLM: none" in out and "preferences: skipped (no LLM: no LLM configured)" in out
    hint = out.strip().splitlines()[-1]
    assert hint.startswith("No LLM is configured, so the LLM passes were skipped: ")
    assert "--llm-provider claude-code" in hint and "llm_provider=openai + llm_model" in hint
    assert out.count("--llm-provider claude-code") == 1
