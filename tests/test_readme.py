"""README.md is part of the contract: its commands, tools, prompts and settings stay true."""

from __future__ import annotations

import re

import pytest
from mcp import Client

from dreamwell.server.config import Settings
from tests.support import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
pytestmark = pytest.mark.anyio


def commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", README.split("## Connect")[0], re.S)


def test_readme_gives_exactly_two_commands_and_ci_runs_the_test_command() -> None:
    install, test = commands()
    assert install.endswith("dreamwell serve") and "pip install ." in install
    assert test.endswith("python -m pytest -q")
    assert test in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


async def test_readme_lists_every_tool_and_prompt(client: Client) -> None:
    for tool in (await client.list_tools()).tools:
        assert f"`{tool.name}(" in README, tool.name
    for prompt in (await client.list_prompts()).prompts:
        assert f"| `{prompt.name}` |" in README, prompt.name


def test_readme_lists_every_setting() -> None:
    for name in Settings.model_fields:
        assert f"| `{name}` |" in README, name


def test_readme_says_where_to_get_it_what_it_costs_and_how_to_leave() -> None:
    """Issue 56 item 6: a newcomer found no source, cost, privacy, check or uninstall step,
    and 10 tests skipped for a binary README never named."""
    top = README.split("## Two commands")[0]
    assert "## What it records and what it costs" in top and "**Privacy.**" in top
    assert "record_conversation off" in top and "no telemetry" in top
    for row in ("disk, installed", "RAM of `serve`", "CPU while backfilling", "tokens a prompt"):
        assert f"| {row}" in top, row
    assert "pipx install ." in README and "git repository" in README
    assert "**Check that it works.** `dreamwell doctor`" in README
    assert "**Uninstall.**" in README and "pipx uninstall dreamwell" in README
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "npm install --prefix .tools/claude-code" in README.replace("\n", " ")
    assert ".tools/claude-code" in ci and "claude-code-version" in ci
    assert "/proc/cpuinfo" in ci and "avx512" in ci  # CI says which CPU features it ran on
