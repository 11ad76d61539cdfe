"""server/heap.py: the C heap's freed pages go back to the kernel when asked."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")


def test_freed_heap_is_given_back() -> None:
    """160 MB of 8 KB blocks (below glibc's mmap threshold, so on the heap), all freed but the
    last, which pins the heap's top: glibc keeps the pages until malloc_trim."""
    code = (
        "import ctypes\n"
        "from dreamwell.server.heap import _LIBC, give_back_freed\n"
        "if _LIBC is None: print('skip'); raise SystemExit\n"
        "def rss():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmRSS'): return int(line.split()[1]) / 1024\n"
        "libc = ctypes.CDLL(None)\n"
        "libc.malloc.restype = ctypes.c_void_p\n"
        "libc.free.argtypes = [ctypes.c_void_p]\n"
        "blocks = [libc.malloc(8192) for _ in range(20_000)]\n"
        "for b in blocks: ctypes.memset(b, 1, 8192)\n"
        "for b in blocks[:-1]: libc.free(b)\n"
        "before = rss(); give_back_freed(); after = rss()\n"
        "print(before - after)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "skip":
        pytest.skip("not glibc")
    assert float(done.stdout) > 100, f"only {float(done.stdout):.0f} MiB given back"


def test_arrow_allocates_through_glibc_not_its_bundled_mimalloc() -> None:
    """pyarrow's own mimalloc kept what it freed: 160 MiB resident in a server after 120,000
    mixed calls (tests/bench/rss_growth_bench.py), out of reach of the trims above. The
    module that owns pyarrow switches it to the system allocator when it loads."""
    code = (
        "import dreamwell.stores.table\n"
        "import pyarrow as pa\n"
        "print(pa.default_memory_pool().backend_name)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "system"
