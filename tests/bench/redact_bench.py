"""Time `redact` on texts built to make a regular expression backtrack (runs of `a-`, `key-`,
`a://`, …) and on random punctuation, 100 KB each: a hook prompt or a saved memory passes
through it before anything is written. Before the fix, 40 KB of `a-a-a-…` took 326 s.

    python tests/bench/redact_bench.py [--kib 100]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

from dreamwell.stores.redact import redact

UNITS = ["a-", "a.", "key-", "token-", "a://", "a:b@", "x=", "SG.", "secret: ", "-u ", "1"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kib", type=int, default=100)
    size = parser.parse_args().kib * 1024
    random.seed(1)
    texts = {repr(u): u * (size // len(u)) for u in UNITS}
    texts["random punctuation"] = "".join(random.choice("aZ09-_.:/@=\"' ") for _ in range(size))
    sys.stderr.write(f"load average {os.getloadavg()[0]:.2f}\n")
    for name, text in texts.items():
        started = time.perf_counter()
        redact(text)
        sys.stderr.write(
            f"{name:<22} {len(text):>8} chars {time.perf_counter() - started:7.3f} s\n"
        )


if __name__ == "__main__":
    main()
