"""The skills catalog on object storage (a local SeaweedFS): what a write, a read and the
cross-replica signal cost, with one conditional PUT measured in the same run as the raw limit.

    python -m tests.bench.remote_skills_bench --skills 100 --rounds 30

Prints medians and p95 of: one conditional PUT (raw), creating a skill, editing one, a batch of
5, how long until another replica's watch (`catalog.version()`, one HEAD) sees a write, a new
replica's first read of the whole catalog (every record fetched) and a new process's first read
on a warm cache directory (only the manifest fetched).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dreamwell.stores import ANY_REVISION, NEW, SkillCatalog, SkillChange
from dreamwell.stores.remote import location as remote
from dreamwell.stores.remote.blobs import CREATE, Blobs, attach
from tests.support.s3server import SeaweedS3
from tests.support.skill_samples import simple_md


def md(name: str, text: str) -> dict[str, bytes]:
    return {"SKILL.md": simple_md(name, text, "words of the body " * 60 + "\n").encode()}


def timed(fn: Callable[[], object]) -> float:
    began = time.perf_counter()
    fn()
    return (time.perf_counter() - began) * 1000


def line(what: str, ms: list[float]) -> None:
    ms = sorted(ms)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    sys.stdout.write(
        f"{what:44s} p50 {statistics.median(ms):8.2f} ms   p95 {p95:8.2f} ms   n={len(ms)}\n"
    )


def seen_after(writer: SkillCatalog, watcher: SkillCatalog, name: str) -> float:
    before = watcher.version()
    began = time.perf_counter()
    writer.apply([SkillChange(name, ANY_REVISION, status="archived")])
    while watcher.version() == before:
        time.sleep(0.005)
    return (time.perf_counter() - began) * 1000


def run(s3: SeaweedS3, root: Path, skills: int, rounds: int) -> None:
    location = remote.Remote.of(s3.uri("bench"), s3.storage_options)
    caches = [root / f"cache{i}" for i in range(4)]
    for cache in caches:
        attach(cache, location)
    a, b = SkillCatalog(caches[0]), SkillCatalog(caches[1])
    raw = Blobs(location, "raw")
    line("raw: one conditional PUT (If-None-Match)", [
        timed(lambda i=i: raw.write(f"k{i}", b"x" * 2000, CREATE)) for i in range(rounds)
    ])  # fmt: skip
    line("create one skill", [
        timed(lambda i=i: a.apply([SkillChange(f"s{i}", NEW, md(f"s{i}", "x"))]))
        for i in range(skills)
    ])  # fmt: skip
    line("edit one skill (compare-and-set)", [
        timed(lambda i=i: a.apply([SkillChange(f"s{i}", ANY_REVISION, md(f"s{i}", "y"))]))
        for i in range(rounds)
    ])  # fmt: skip
    line("a batch of 5 edits, whole", [
        timed(lambda i=i: a.apply(
            [SkillChange(f"s{(i * 5 + j) % skills}", ANY_REVISION, status="active")
             for j in range(5)], whole=True))
        for i in range(rounds)
    ])  # fmt: skip
    line("another replica's watch sees a write", [
        seen_after(a, b, f"s{i}") for i in range(rounds)
    ])  # fmt: skip
    line(f"new replica, first list() of {skills}", [timed(SkillCatalog(caches[2]).list)])
    line(f"new process, warm cache, list() of {skills}", [
        timed(SkillCatalog(caches[2]).list) for _ in range(rounds)
    ])  # fmt: skip
    line("list() of a catalog read before (one HEAD)", [
        timed(lambda: (b._storage._refresh(0.0), b.list())) for _ in range(rounds)  # type: ignore[attr-defined]
    ])  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skills", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    with SeaweedS3() as s3, tempfile.TemporaryDirectory() as root:
        run(s3, Path(root), args.skills, args.rounds)
    with open("/proc/loadavg") as fh:
        sys.stdout.write(f"load average: {' '.join(fh.read().split()[:3])}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
