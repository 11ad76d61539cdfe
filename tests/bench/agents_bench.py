"""What a Codex, Gemini CLI or Copilot CLI user pays for dreamwell (issue 55, goal: ≤ 1.3×):
each agent's real binary (tests/support/agents.py) running one prompt non-interactively
against a scripted model API on 127.0.0.1, with `dreamwell install AGENT` done and without
(the same HOME otherwise), in alternating pairs; prints the medians, their ratio and the load
average before and after (not collected by pytest).

    python tests/bench/agents_bench.py [--pairs 3] [--agents codex,gemini,copilot]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support.agent_apis import GeminiAPI, ResponsesAPI  # noqa: E402
from tests.support.agents import AgentHome  # noqa: E402
from tests.support.repos import make_repo  # noqa: E402

PROMPT = "Say OK"


def pairs(agent: str, count: int, root: Path) -> tuple[list[float], list[float]]:
    api = GeminiAPI() if agent == "gemini" else ResponsesAPI()
    with api:
        repo = make_repo(root / "repo", {"origin": "git@github.com:acme/shop.git"})
        bare, with_dw = AgentHome(root / "bare", agent), AgentHome(root / "with", agent)
        for home in (bare, with_dw):
            home.configure(api, repo)
        with_dw.dreamwell("install", agent)
        bare.run(api, PROMPT, repo)  # first runs (caches) left out
        with_dw.run(api, PROMPT, repo)
        plain, ours = [], []
        for _ in range(count):
            plain.append(bare.run(api, PROMPT, repo).seconds)
            ours.append(with_dw.run(api, PROMPT, repo).seconds)
        with_dw.close()
    return plain, ours


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--agents", default="codex,gemini,copilot")
    args = parser.parse_args()
    sys.stdout.write(f"load before: {os.getloadavg()}\n")
    for agent in args.agents.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            plain, ours = pairs(agent, args.pairs, Path(tmp))
        a, b = statistics.median(plain), statistics.median(ours)
        each = f"{[round(x, 2) for x in plain]} / {[round(x, 2) for x in ours]}"
        sys.stdout.write(
            f"{agent}: without {a:.2f} s, with dreamwell {b:.2f} s: {b / a:.2f}x "
            f"({args.pairs} pairs: {each})\n"
        )
        sys.stdout.flush()
    sys.stdout.write(f"load after: {os.getloadavg()}\n")


if __name__ == "__main__":
    main()
