"""What working memory, the input logs and the dream's lease cost on an object store: a local
SeaweedFS (`weed mini`), two replicas with their own caches.

    python -m tests.bench.remote_shared_bench [N]

Prints medians and p95 in ms: a working-memory save, a get (version checked), the time until
another replica reads a save, a log append, reading N appended records cold and warm, taking
and releasing the dream's lease, and one raw conditional PUT for scale.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dreamwell.stores import FEEDBACK, JsonlLog, NotFound, WorkingMemory
from dreamwell.stores.lease import Lease
from dreamwell.stores.remote.blobs import CREATE, Blobs, attach
from dreamwell.stores.remote.location import Remote
from tests.support.s3server import SeaweedS3

NS = "session/bench"


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        began = time.perf_counter()
        fn()
        out.append(1000 * (time.perf_counter() - began))
    return out


def show(name: str, ms: list[float]) -> None:
    ms = sorted(ms)
    p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
    median = statistics.median(ms)
    sys.stdout.write(f"{name:<34} p50 {median:8.1f} ms   p95 {p95:8.1f} ms   (n={len(ms)})\n")


def visible(a: WorkingMemory, b: WorkingMemory, i: int) -> float:
    a.save(NS, "seen", f"value {i}", ttl_minutes=60)
    began = time.perf_counter()
    while True:
        try:
            if b.get("seen", NS).value == f"value {i}":
                return 1000 * (time.perf_counter() - began)
        except NotFound:
            pass
        time.sleep(0.005)


def main(n: int) -> None:
    with SeaweedS3(bucket="bench") as s3, tempfile.TemporaryDirectory() as tmp:
        location = Remote.of(s3.uri("b"), s3.storage_options)
        caches = [Path(tmp) / f"c{k}" for k in range(2)]
        for cache in caches:
            attach(cache, location)
        a, b = (WorkingMemory(c, max_per_namespace=1000) for c in caches)
        raw = Blobs(location, "raw")
        show("raw conditional PUT (create)", timed(lambda: raw.write(_name(), b"x", CREATE), n))
        count = iter(range(10**9))
        show("wm save", timed(lambda: a.save(NS, f"k{next(count)}", "v" * 200), n))
        show("wm get", timed(lambda: a.get("k0", NS), n))
        show("wm visible on another replica", [visible(a, b, i) for i in range(min(n, 30))])
        log = JsonlLog(caches[0], FEEDBACK)
        show("log append", timed(lambda: log.append({"kind": "helpful", "x": "y" * 100}), n))
        show("log read cold (one replica)", timed(lambda: JsonlLog(caches[1], FEEDBACK).read(), 1))
        show("log read warm", timed(lambda: JsonlLog(caches[1], FEEDBACK).read(), 5))
        lease = Lease(Blobs(location, "leases"), "bench")
        show("lease take + release", timed(lambda: (lease.acquire(), lease.release()), n))
    sys.stdout.write(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}\n")


def _name() -> str:
    return f"{time.time_ns()}.bin"


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
