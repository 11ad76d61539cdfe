"""What keeping the skills as Claude Code's skill folders adds to the session-start hook (not
collected by pytest): `dreamwell hook session-start` as Claude Code runs it (a fresh process,
JSON on stdin), with N active skills, the sync off against on and in step (the usual session
start: nothing to write), alternating runs; and `sync_skills` in-process, in step (what the
hook adds, without the noise of process start) and when one skill changed (what a server's
skills watch does).

    python tests/bench/skills_sync_bench.py [--skills 20] [--runs 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dreamwell.stores.layout import DataDir
from dreamwell.stores.skills import SkillCatalog, enable_sync, make_folder, sync_skills

DREAMWELL = str(Path(sys.executable).with_name("dreamwell"))
BODY = "1. Check out a clean `main`.\n2. Run `make release`.\n3. Push the tag.\n" * 20


def skill_md(i: int) -> bytes:
    return f"---\nname: skill-{i}\ndescription: Procedure number {i}\n---\n\n{BODY}".encode()


def hook_ms(data: Path, session: str) -> float:
    given = {"session_id": session, "transcript_path": "/none", "cwd": "/", "source": "startup"}
    started = time.perf_counter()
    subprocess.run(
        [DREAMWELL, "hook", "session-start", "--data-dir", str(data)],
        input=json.dumps(given).encode(),
        capture_output=True,
        check=True,
        env={**os.environ, "DREAMWELL_EMBEDDER": "none"},
    )
    return (time.perf_counter() - started) * 1000


def say(text: str) -> None:
    sys.stdout.write(text + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skills", type=int, default=20)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        off, on = Path(tmp) / "off", Path(tmp) / "on"
        for data in (off, on):
            catalog = SkillCatalog(data)
            for i in range(args.skills):
                catalog.put(make_folder(f"skill-{i}", {"SKILL.md": skill_md(i)}, "bench"))
        enable_sync(DataDir(on), Path(tmp) / "claude-skills")
        sync_skills(SkillCatalog(on))
        times: dict[str, list[float]] = {"off": [], "on": []}
        say(f"load average before: {os.getloadavg()}")
        for run in range(args.runs):
            for name, data in (("off", off), ("on", on)):
                times[name].append(hook_ms(data, f"{name}-{run}"))
        steady = []
        for _ in range(10):  # a fresh catalog each time, as a hook process has
            started = time.perf_counter()
            sync_skills(SkillCatalog(on))
            steady.append((time.perf_counter() - started) * 1000)
        catalog = SkillCatalog(on)
        changed = []
        for i in range(10):
            skill = catalog.get("skill-0")
            text = skill_md(0) + f"\nrevision {i}\n".encode()
            catalog.put(make_folder("skill-0", {"SKILL.md": text}, "bench"), skill.revision)
            started = time.perf_counter()
            sync_skills(catalog)
            changed.append((time.perf_counter() - started) * 1000)
        say(f"load average after: {os.getloadavg()}")
    say(f"session-start hook, {args.skills} active skills, {args.runs} alternating runs:")
    for name, values in times.items():
        say(
            f"  sync {name:<3}  p50 {statistics.median(values):6.0f} ms   max {max(values):6.0f} ms"
        )
    say(f"sync_skills in-process, in step: p50 {statistics.median(steady):.1f} ms")
    say(f"sync_skills in-process, one skill changed: p50 {statistics.median(changed):.1f} ms")


if __name__ == "__main__":
    main()
