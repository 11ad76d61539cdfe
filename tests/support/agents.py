"""The real Codex, Gemini CLI and Copilot CLI binaries, each run once non-interactively
against a scripted model API on 127.0.0.1 (tests/support/agent_apis.py), with dreamwell
installed by `dreamwell install AGENT` into a temp HOME. Never an imitation of the agent.

The binaries are the pinned npm packages `.ci/run` installs into `.tools/<agent>/`
(`.ci/<agent>-version`); without one the tests that need it skip, and with CI set they fail.

    home = AgentHome(tmp_path, "gemini")     # temp HOME, a repository, the data directory
    home.dreamwell("install", "gemini")
    with GeminiAPI(brain) as api:
        run = home.run(api, "How do we deploy?", cwd=repo)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support import ROOT, pinned
from tests.support.agent_apis import ScriptedAPI
from tests.support.hooks import settle, stop_residents

DREAMWELL = Path(sys.executable).parent / "dreamwell"
BINARIES = {"codex": "codex", "gemini": "gemini", "copilot": "copilot"}
PACKAGES = {"codex": "@openai/codex", "gemini": "@google/gemini-cli", "copilot": "@github/copilot"}
OPEN: list[AgentHome] = []  # closed after each test (tests/conftest.py)


def version(agent: str) -> str:
    return (ROOT / ".ci" / f"{agent}-version").read_text().strip()


def binary(agent: str) -> Path:
    """The pinned binary; skips the test without it (fails with CI set)."""
    found = ROOT / ".tools" / agent / "node_modules" / ".bin" / BINARIES[agent]
    return pinned(found, f"{agent} {version(agent)}", agent, f"{PACKAGES[agent]}@{version(agent)}")


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def close_all() -> None:
    while OPEN:
        OPEN.pop().close()


class AgentHome:
    """A temp HOME for one user of `agent`: its config, dreamwell's data directory."""

    def __init__(self, root: Path, agent: str, codex_home: Path | None = None) -> None:
        self.agent = agent
        self.codex_home = codex_home  # CODEX_HOME, when the user set one
        self.binary = binary(agent)
        self.root = root
        self.home = root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.home / ".local" / "share" / "dreamwell"
        self.run_dir = Path(tempfile.mkdtemp(prefix="dw", dir="/tmp"))
        OPEN.append(self)

    def close(self) -> None:
        stop_residents(self.run_dir)

    def env(self, api: ScriptedAPI | None = None) -> dict[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "CI")
        env = {k: v for k, v in os.environ.items() if k in keep}
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            XDG_RUNTIME_DIR=str(self.run_dir),
            TERM="dumb",
            DREAMWELL_EMBEDDER="none",
            NO_COLOR="1",
        )
        env["PATH"] = f"{DREAMWELL.parent}{os.pathsep}{env.get('PATH', '')}"
        if self.codex_home is not None:
            env["CODEX_HOME"] = str(self.codex_home)
        url = api.url if api is not None else "http://127.0.0.1:9"
        return env | AGENT_ENV[self.agent](self, url)

    def dreamwell(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(DREAMWELL), *args],
            env=self.env(),
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"dreamwell {' '.join(args)}: {done.stderr}"
        return done

    def run(self, api: ScriptedAPI, prompt: str, cwd: Path) -> Run:
        """One prompt, non-interactively, in `cwd`; the hooks' work done when it returns."""
        began = time.monotonic()
        done = subprocess.run(
            [str(self.binary), *ARGS[self.agent](prompt)],
            env=self.env(api),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        seconds = time.monotonic() - began
        settle(self.run_dir)
        return Run(done.returncode, done.stdout, done.stderr, seconds)

    def configure(self, api: ScriptedAPI, cwd: Path) -> None:
        """The user's own config, before dreamwell is installed: the agent pointed at the
        scripted API, `cwd` trusted."""
        if self.agent == "codex":  # a custom provider on the Responses API
            path = (self.codex_home or self.home / ".codex") / "config.toml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(CODEX_PROVIDER.format(url=api.url))
        elif self.agent == "gemini":
            (self.home / ".gemini").mkdir(parents=True, exist_ok=True)
            path = self.home / ".gemini" / "settings.json"
            path.write_text(json.dumps(GEMINI_SETTINGS, indent=2))
            trusted = self.home / ".gemini" / "trustedFolders.json"
            trusted.write_text(json.dumps({str(cwd): "TRUST_FOLDER"}))


CODEX_PROVIDER = """model = "gpt-fake"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "FAKE_OPENAI_API_KEY"
"""
GEMINI_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
}
# Copilot unpacks ~235 MB into its cache on a first run: one cache for every test
COPILOT_CACHE = ROOT / ".tools" / "copilot" / "cache"

AGENT_ENV = {
    "codex": lambda home, url: {"FAKE_OPENAI_API_KEY": "sk-test-not-a-real-key"},
    "gemini": lambda home, url: {"GEMINI_API_KEY": "test-key", "GOOGLE_GEMINI_BASE_URL": url},
    "copilot": lambda home, url: {
        "COPILOT_PROVIDER_BASE_URL": f"{url}/v1",
        "COPILOT_PROVIDER_WIRE_API": "responses",
        "COPILOT_PROVIDER_API_KEY": "sk-test-not-a-real-key",
        "COPILOT_MODEL": "gpt-fake",
        "COPILOT_OFFLINE": "true",
        "COPILOT_AUTO_UPDATE": "false",
        "XDG_CACHE_HOME": str(COPILOT_CACHE),
    },
}
ARGS = {
    "codex": lambda prompt: ["exec", "--skip-git-repo-check", prompt],
    "gemini": lambda prompt: ["-p", prompt, "-o", "json"],
    "copilot": lambda prompt: ["-p", prompt, "--allow-all-tools"],
}


# ---- one session of an agent in a repository with a memory of its own -------------------------
SHOP_REMOTE = "git@github.com:acme/shop.git"  # tests/support/repos.py `two_projects`
CLAUDE_FACT = "Run make check-shop before you deploy the shop"  # saved in Claude Code
CLAUDE_PROMPT = "Remember to check before deploying"  # the Claude Code session's prompt
SHOP_FACT = "Deploy the shop with make deploy-shop from the repository root"
BILLING_FACT = "Deploy billing with kubectl apply -f billing.yaml"
PROMPT = "How do I deploy the shop?"
SAVED = "The shop's release notes go in CHANGES.md"  # what the model saves through the agent
SKILL = "shop-release"  # a skill the dream learned: kept in ~/.agents/skills, which all load
SKILL_MD = f"---\nname: {SKILL}\ndescription: Release the shop service\n---\n\nRun make release.\n"


@dataclass(frozen=True)
class Session:
    """What one run showed: the agent's requests, what dreamwell recorded, the install's
    output and the hooks' log."""

    run: Run
    requests: list[dict[str, object]]  # those that offered tools, in order
    turns: list[dict[str, object]]
    usage: list[dict[str, object]]
    log: str
    installed: str
    ids: dict[str, str]
    skill_folder: Path
    saved: dict[str, str | None]  # content -> project of each memory afterwards
    root: Path  # the HOME is root / "home"


def one_session(
    root: Path,
    agent: str,
    api: ScriptedAPI,
    home: AgentHome | None = None,
    claude: bool = False,
    clone: bool = False,
) -> Session:
    """Seed a fact of the shop's repository and one of billing's (`claude`: and have a real
    Claude Code session in the shop save CLAUDE_FACT, `ids["claude"]`), install dreamwell for
    `agent` (`home`: one set up otherwise, such as with CODEX_HOME), run PROMPT in the shop
    (`clone`: in a clone of it, in another folder) with the scripted API in `api`, and read
    what came of it."""
    from dreamwell.server.hooks.refresh import refresh
    from dreamwell.stores import PROJECT, DataDir, JsonlLog, LongTermStore, SkillCatalog
    from dreamwell.stores.skills import make_folder
    from tests.support.repos import make_repo, two_projects

    home = home or AgentHome(root, agent)
    shop, _ = two_projects(root / "src")
    here = make_repo(root / "elsewhere" / "shop", {"origin": SHOP_REMOTE}) if clone else shop
    store = LongTermStore(home.data_dir)
    ids = {
        "shop": store.save(SHOP_FACT, metadata={PROJECT: "github.com/acme/shop"}).entry.id,
        "billing": store.save(BILLING_FACT, metadata={PROJECT: "github.com/acme/billing"}).entry.id,
    }
    assert store.checkpoint()
    refresh(DataDir(home.data_dir))
    SkillCatalog(home.data_dir).put(make_folder(SKILL, {"SKILL.md": SKILL_MD.encode()}, SKILL))
    if claude:
        ids["claude"] = claude_saves(root, shop)
    home.configure(api, here)
    installed = home.dreamwell("install", agent).stdout
    run = home.run(api, PROMPT, here)
    assert run.returncode == 0, run.stderr[-3000:]
    log = (
        (home.data_dir / "hooks.log").read_text() if (home.data_dir / "hooks.log").exists() else ""
    )
    return Session(
        run,
        api.with_tools(),
        JsonlLog(home.data_dir, "conversation.jsonl").read(),
        JsonlLog(home.data_dir, "skill-usage.jsonl").read(),
        log,
        installed,
        ids,
        home.home / ".agents" / "skills" / SKILL / "SKILL.md",
        {e.content: e.metadata.get(PROJECT) for e in LongTermStore(home.data_dir).entries()},
        root,
    )


def claude_saves(root: Path, repo: Path) -> str:
    """A real Claude Code session in `repo` (the HOME and data directory of `AgentHome(root)`)
    saving CLAUDE_FACT through dreamwell's MCP tool: the id of the memory it saved."""
    from dreamwell.stores import LongTermStore
    from tests.support.anthropic_api import AnthropicAPI, Turn, is_main, messages_text, tool_results
    from tests.support.claude_code import ClaudeHome

    save = "mcp__dreamwell__save_memory"

    def brain(request: dict[str, object]) -> Turn:
        if not is_main(request):
            return Turn(text="Deploy notes")
        if "Saved memory [" in messages_text(request):
            return Turn(text="Saved.")
        if not tool_results(request):  # Claude Code loads MCP tools through ToolSearch
            return Turn(tools=[("ToolSearch", {"query": f"select:{save}"})])
        return Turn(tools=[(save, {"content": CLAUDE_FACT})])

    claude = ClaudeHome(root)
    claude.dreamwell("install", "claude-code")
    with AnthropicAPI(brain) as api:
        run = claude.claude(
            api, "Remember to check before deploying", "--allowedTools", save, cwd=repo
        )
    assert run.returncode == 0, run.stderr
    [saved] = [e for e in LongTermStore(claude.data_dir).entries() if e.content == CLAUDE_FACT]
    return saved.id
