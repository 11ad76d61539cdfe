"""How long a call takes to fail when the object store is down (not collected by pytest): the
figures a call time-out is chosen from. On a local SeaweedFS (started here, stopped at the end)
it times obstore and LanceDB calls against a server that is stopped (connections refused) and
one that is hung (SIGSTOP: connections accepted, nothing answered), per option set.

    python tests/bench/s3_outage_bench.py             # tuned option sets only (~2 minutes)
    python tests/bench/s3_outage_bench.py --defaults  # also the defaults: ~30 minutes when hung

Option sets (obstore `client_options`/`retry_config`; LanceDB `storage_options` strings):
- default: obstore 30 s per request, 10 retries within 180 s; LanceDB the same underneath
- t2r2: 2 s per request (1 s to connect), 2 retries within 5 s
- t1r0: 1 s per request, no retries
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import obstore
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.support.s3server

from tests.support.s3server import SeaweedS3

OBSTORE: dict[str, dict[str, Any]] = {
    "default": {},
    "t2r2": {
        "client_options": {"timeout": "2s", "connect_timeout": "1s"},
        "retry_config": {"max_retries": 2, "retry_timeout": timedelta(seconds=5)},
    },
    "t1r0": {
        "client_options": {"timeout": "1s", "connect_timeout": "1s"},
        "retry_config": {"max_retries": 0},
    },
}
LANCE: dict[str, dict[str, str]] = {
    "default": {},
    "t2r2": {
        "timeout": "2s",
        "connect_timeout": "1s",
        "client_max_retries": "2",
        "client_retry_timeout": "5",
    },
    "t1r0": {
        "timeout": "1s",
        "connect_timeout": "1s",
        "client_max_retries": "0",
        "client_retry_timeout": "1",
    },
}


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def time_to_fail(call: Callable[[], object]) -> str:
    start = time.monotonic()
    try:
        call()
    except Exception as e:
        took = time.monotonic() - start
        return f"{took:7.2f} s  {type(e).__name__}"
    return f"{time.monotonic() - start:7.2f} s  succeeded (!)"


def calls(s3: SeaweedS3, name: str, how: str) -> dict[str, Callable[[], object]]:
    """The calls to time for one option set, with their stores opened while the server is up."""
    import lancedb

    store = s3.store(f"o-{how}-{name}", **OBSTORE[name])
    obstore.put(store, "kept", b"x")
    db = lancedb.connect(
        s3.uri(f"l-{how}-{name}"), storage_options={**s3.storage_options, **LANCE[name]}
    )
    table = db.create_table("t", pa.table({"n": [1]}))
    return {
        "obstore put": lambda: obstore.put(store, "a", b"x"),
        "obstore put create": lambda: obstore.put(store, "b", b"x", mode="create"),
        "obstore get": lambda: obstore.get(store, "kept").bytes(),
        "obstore list": lambda: obstore.list(store).collect(),
        "lancedb add": lambda: table.add(pa.table({"n": [2]})),
        "lancedb checkout_latest": table.checkout_latest,
        "lancedb open_table": lambda: db.open_table("t"),
    }


def run(s3: SeaweedS3, names: list[str], how: str) -> None:
    prepared = {name: calls(s3, name, how) for name in names}
    s3.pause() if how == "stopped" else s3.freeze()
    try:
        for name, timed in prepared.items():
            for label, call in timed.items():
                say(f"{how:8s} {name:8s} {label:24s} {time_to_fail(call)}")
    finally:
        s3.resume() if how == "stopped" else s3.thaw()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--defaults", action="store_true", help="also time the default options")
    args = parser.parse_args()
    hung = [n for n in OBSTORE if args.defaults or n != "default"]
    say(f"load before: {Path('/proc/loadavg').read_text().strip()}")
    with SeaweedS3(bucket="outage") as s3:
        run(s3, list(OBSTORE), "stopped")  # the defaults fail within seconds when refused
        run(s3, hung, "hung")
    say(f"load after: {Path('/proc/loadavg').read_text().strip()}")


if __name__ == "__main__":
    main()
