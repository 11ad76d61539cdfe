"""A wall-clock stack sampler for the benches (py-spy cannot read this machine's Python).

With DREAMWELL_SAMPLE=PREFIX in the environment and this folder on PYTHONPATH, a
`dreamwell serve` process samples every thread's Python stack each 2 ms between SIGUSR1
(start) and SIGUSR2 (write PREFIX.<pid>.<k>, k = 1, 2, ... per stop: one line per stack,
`frame;frame;... count`).
Time spent in a C extension is counted on the Python frame that called it.
"""

import collections
import os
import signal
import sys
import threading
import time

_OUT = os.environ.get("DREAMWELL_SAMPLE")


def _sample(counts: collections.Counter[str], on: threading.Event) -> None:
    me = threading.get_ident()
    while True:
        on.wait()
        time.sleep(0.002)
        for tid, frame in sys._current_frames().items():
            if tid == me:
                continue
            stack = []
            f = frame
            while f is not None:
                stack.append(f"{os.path.basename(f.f_code.co_filename)}:{f.f_code.co_name}")
                f = f.f_back
            counts[";".join(reversed(stack))] += 1


def _install(out: str) -> None:
    counts: collections.Counter[str] = collections.Counter()
    on = threading.Event()

    def start(*_: object) -> None:
        counts.clear()
        on.set()

    stops = [0]

    def stop(*_: object) -> None:
        on.clear()
        stops[0] += 1
        with open(f"{out}.{os.getpid()}.{stops[0]}", "w") as fh:
            fh.writelines(f"{k} {v}\n" for k, v in counts.most_common())

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    threading.Thread(target=_sample, args=(counts, on), daemon=True).start()


if _OUT and "serve" in sys.argv:
    _install(_OUT)
