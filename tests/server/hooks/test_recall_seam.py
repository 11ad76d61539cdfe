"""The prompt hook injects what `search_memory` finds (issue 54): one function ranks for every
injecting path (stores/hooks/inject.py), the resident hook process holds the store and its
embedder (server/hooks/hybrid.py), and only what is relevant is injected. In process, with the
shipped e5 model on a real store; the resident's own process is tested in test_resident.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dreamwell.server.config import Settings
from dreamwell.server.hooks import hybrid
from dreamwell.server.hooks import settings as hook_settings
from dreamwell.server.hooks.events import hook_output
from dreamwell.server.runtime import Runtime
from dreamwell.stores import DataDir, LongTermStore, OnnxE5
from dreamwell.stores.hooks import HookSessions
from tests.support.everyday import CODING_PROMPTS, PROJECT_MEMORIES
from tests.support.hooks import prompt

IDS = re.compile(r"\[([0-9a-f]{12})\]")


@pytest.fixture(scope="module")
def resident(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A store of a new user's project memories (vectors by e5) and, in this process, the
    resident's hybrid ranking of it, ready (one for the module: the model loads once)."""
    tmp_path = tmp_path_factory.mktemp("resident")
    store = LongTermStore(tmp_path, embedder=OnnxE5(), keyword_weight=0.4, min_similarity=0.7)
    for content in PROJECT_MEMORIES:
        store.save(content, "projects/web")
    while store.backfill():
        pass
    made = hybrid.Hybrid(tmp_path, "", {"embedder": "e5"})
    hybrid._resident = made
    made.start()
    deadline = time.monotonic() + 60
    while made.ranker(DataDir(tmp_path)) is None:
        assert time.monotonic() < deadline, made.why
        time.sleep(0.02)
    yield tmp_path
    made.stop()
    hybrid._resident = None


def ask(data: Path, text: str, session: str = "s1", **env: str) -> str:
    """The prompt hook's output as the resident gives it (`env`: the hook's settings)."""
    settings = hook_settings.read(str(data), env)
    raw = json.dumps(prompt(session, text, cwd="/")).encode()
    return hook_output(settings, "user-prompt", None, raw, " (resident)")


def test_the_prompt_hook_injects_what_search_memory_finds_in_its_order(
    resident: Path,
) -> None:
    """search_memory's own call (server/mcp/tools.py) in a server's runtime whose vectors
    are loaded, against the hook's injection."""
    runtime = Runtime(Settings(data_dir=resident, embedder="e5"))
    store = runtime.open_tenant("").longterm
    store.load_vectors()
    runtime.embedder.warm()  # type: ignore[union-attr]  # as the server's start-up does
    queries = (
        "which postgres version is staging on",
        "what time zone is the user in",
        "where do we deploy from",
        "frontend",
    )
    for n, query in enumerate(queries):
        searched = [h.entry.id for h in store.search(query, None, None, limit=20, project=None)]
        injected = IDS.findall(ask(resident, query, session=f"agree{n}"))
        assert injected == searched[:8], query
    assert any(injected for query in queries)


def test_everyday_coding_prompts_inject_nothing(resident: Path) -> None:
    """Each of these got 3-8 memories injected before (by words: "what is 2+2" recalled
    every memory holding a "2")."""
    injected = {p: ask(resident, p, session=f"code{n}") for n, p in enumerate(CODING_PROMPTS)}
    assert injected == dict.fromkeys(CODING_PROMPTS, "")


def test_a_memory_saved_by_a_process_that_lived_a_second_is_found_by_meaning(
    resident: Path,
) -> None:
    """A `claude -p` session's server saves and exits before it embeds: the next prompt hook
    finds the memory by meaning (no word shared), without waiting for anyone's backfill."""
    saver = (
        "import sys; from dreamwell.stores import LongTermStore; "
        "LongTermStore(sys.argv[1]).save('The office wifi password hint is the name of the cat')"
    )
    subprocess.run([sys.executable, "-c", saver, str(resident)], check=True)
    out = ask(resident, "where does the office network secret come from")
    assert "The office wifi password hint is the name of the cat" in out
    log = DataDir(resident).hooks_log.read_text()
    assert "keyword-only" not in log and "(resident)" in log


def test_until_the_embedder_is_loaded_a_hook_ranks_by_keywords_and_says_so(
    tmp_path: Path,
) -> None:
    store = LongTermStore(tmp_path)
    store.save("Staging runs Postgres 15 on the db-stage host")
    store.checkpoint()
    hybrid._resident = hybrid.Hybrid(tmp_path, "", {})  # not started: still loading
    try:
        out = ask(tmp_path, "which postgres version is staging on")
    finally:
        hybrid._resident = None
    assert "Postgres 15" in out
    assert "user-prompt keyword-only: embedder loading" in DataDir(tmp_path).hooks_log.read_text()
    ask(tmp_path, "which postgres version runs on staging", session="own")
    log = DataDir(tmp_path).hooks_log.read_text()
    assert "user-prompt keyword-only: the hook ran as its own process" in log


def test_a_session_injects_within_its_budget(resident: Path) -> None:
    """hook_session_chars bounds what a session's hooks inject in all; `dreamwell stats`
    reads what each session injected."""
    budget = {"session": "budget", "hook_session_chars": "150"}
    first = ask(resident, "which postgres version is staging on", **budget)
    assert 0 < len(first) <= 151
    assert ask(resident, "what time zone is the user in", **budget) == ""
    state = HookSessions(DataDir(resident)).load("budget")
    assert state.injected_chars == len(first.rstrip("\n")) == state.budget_used
