"""A server whose saves are never held for the backfill, for stdio_save_tail_bench.py's
--unpaced (not product code): what a save costs beside the embedder with no pacing at all.

With this folder on PYTHONPATH, a `dreamwell serve` process opens its stores with no save
backlog (`LongTermStore.hold_save` is then never called): a flood of saves leaves the backfill
as far behind as it falls.
"""

import sys

if "serve" in sys.argv:
    from dreamwell.server import runtime

    runtime.SAVE_BACKLOG = None  # type: ignore[assignment]
