"""Projects with the real Claude Code (docs/claude-code.md, docs/projects.md): two repositories, a
deploy command saved through dreamwell's MCP tool from a Claude Code session in each, and then what
Claude Code's hooks inject into the model's context in one project holds that project's command and
never the other's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.anthropic_api import AnthropicAPI, Turn, is_main, messages_text, tool_results
from tests.support.claude_code import ClaudeHome
from tests.support.repos import two_projects

SAVE = "mcp__dreamwell__save_memory"
SHOP_DEPLOY = "Deploy the shop with make ship-shop-now"
BILLING_DEPLOY = "Deploy billing with kubectl apply -f billing-prod.yaml"


def _saver(content: str) -> Any:
    """A model that loads dreamwell's save tool through ToolSearch and saves `content`."""

    def brain(request: dict[str, Any]) -> Turn:
        if not is_main(request):
            return Turn(text="Deploy notes")
        if "Saved memory [" in messages_text(request):
            return Turn(text="Saved.")
        if not tool_results(request):
            return Turn(tools=[("ToolSearch", {"query": f"select:{SAVE}"})])
        return Turn(tools=[(SAVE, {"content": content})])

    return brain


def _answer(request: dict[str, Any]) -> Turn:
    return Turn(text="Use the deploy command." if is_main(request) else "Deploy")


def test_claude_code_in_one_project_is_never_shown_another_project_s_deploy_command(
    tmp_path: Path,
) -> None:
    home = ClaudeHome(tmp_path)
    home.dreamwell("install", "claude-code")
    shop, billing = two_projects(tmp_path / "src")
    for where, content in ((shop, SHOP_DEPLOY), (billing, BILLING_DEPLOY)):
        with AnthropicAPI(_saver(content)) as api:
            run = home.claude(api, "Remember how we deploy", "--allowedTools", SAVE, cwd=where)
        assert run.returncode == 0, run.stderr
        assert any("Saved memory [" in messages_text(q) for q in api.main_requests())
    with AnthropicAPI(_answer) as api:
        run = home.claude(api, "How do we deploy this?", cwd=shop)
    assert run.returncode == 0, run.stderr
    seen = "\n".join(messages_text(r) for r in api.main_requests())
    assert SHOP_DEPLOY in seen  # the prompt hook's recall reached the model
    assert "kubectl" not in seen and "billing-prod" not in seen
    with AnthropicAPI(_answer) as api:
        run = home.claude(api, "How do we deploy this?", cwd=billing)
    seen = "\n".join(messages_text(r) for r in api.main_requests())
    assert "billing-prod.yaml" in seen and "ship-shop-now" not in seen
