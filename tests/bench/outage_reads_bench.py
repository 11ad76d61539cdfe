"""Reads and writes of one replica while its object store hangs or refuses (not collected by
pytest): searches, categories and working-memory reads are served from what the replica
holds (issue 45: every search took ~33 s on a frozen store); a save fails in one line within
the call time-out.

    python tests/bench/outage_reads_bench.py --searches 20

A local SeaweedFS is started (and stopped at the end); one replica saves 200 memories and a
working-memory key, another replica saves one more (news to catch up on), then the store is
frozen (SIGSTOP) and, separately, stopped; for each: p50/p99/max of the reads (ms) while a
save waits on the store, and how long that save took to fail. Prints the load average.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.support

from dreamwell.stores import LongTermStore, WorkingMemory
from dreamwell.stores.errors import StoreError
from dreamwell.stores.remote import location as remote
from dreamwell.stores.remote.blobs import attach
from tests.support.s3server import SeaweedS3


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def ms(call: object) -> float:
    began = time.perf_counter()
    call()  # type: ignore[operator]
    return 1000 * (time.perf_counter() - began)


def outage(s3: SeaweedS3, how: str, searches: int, root: Path) -> None:
    location = remote.Remote.of(s3.uri(how), s3.storage_options)
    mine, other = root / f"{how}-a", root / f"{how}-b"
    attach(mine, location)
    attach(other, location)
    store, elsewhere, working = LongTermStore(mine), LongTermStore(other), WorkingMemory(mine)
    for i in range(200):
        store.save(f"note {i} about deploys to the staging cluster", f"ops/{i % 5}")
    working.save("session/bench", "plan", "ship on friday")
    healthy = [ms(lambda: store.search("staging cluster")) for _ in range(searches)]
    elsewhere.save("news from another replica", "ops/0")
    failed: list[float] = []

    def save() -> None:
        began = time.perf_counter()
        with contextlib.suppress(StoreError):
            store.save("written during the outage", "ops/x")
        failed.append(time.perf_counter() - began)

    s3.freeze() if how == "frozen" else s3.pause()
    try:
        writer = threading.Thread(target=save)
        writer.start()
        reads = [ms(lambda: store.search("staging cluster")) for _ in range(searches)]
        others = [ms(store.categories), ms(lambda: working.get("plan", "session/bench"))]
        writer.join()
    finally:
        s3.thaw() if how == "frozen" else s3.resume()
    say(
        f"{how:7} | healthy search p50 {statistics.median(healthy):6.1f} "
        f"p99 {pct(healthy, 0.99):6.1f} | outage search p50 {statistics.median(reads):6.1f} "
        f"p99 {pct(reads, 0.99):7.1f} (first {reads[0]:6.1f}) | categories {others[0]:6.1f} | "
        f"wm get {others[1]:6.1f} ms | save failed after {failed[0]:5.1f} s | load {loadavg()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--searches", type=int, default=20)
    args = parser.parse_args()
    say(f"load before: {loadavg()}")
    with tempfile.TemporaryDirectory() as tmp, SeaweedS3(bucket="outage") as s3:
        for how in ("frozen", "stopped"):
            outage(s3, how, args.searches, Path(tmp))
    say(f"load after: {loadavg()}")


if __name__ == "__main__":
    main()
