"""server/heap.py: the C heap's freed pages go back to the kernel when asked."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")


def _printed(code: str) -> str:
    """What `code` prints in a fresh interpreter (its own heap); skips the test if the code
    printed 'skip' (not glibc)."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "skip":
        pytest.skip("not glibc")
    return done.stdout.strip()


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
    given_back = float(_printed(code))
    assert given_back > 100, f"only {given_back:.0f} MiB given back"


def test_arrow_allocates_through_glibc_not_its_bundled_mimalloc() -> None:
    """pyarrow's own mimalloc kept what it freed: 160 MiB resident in a server after 120,000
    mixed calls (tests/bench/rss_growth_bench.py), out of reach of the trims above. The
    module that owns pyarrow switches it to the system allocator when it loads."""
    code = (
        "import dreamwell.stores.longterm.lance_table\n"
        "import pyarrow as pa\n"
        "print(pa.default_memory_pool().backend_name)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "system"


def test_big_blocks_stay_mapped_on_their_own_after_one_is_freed() -> None:
    """glibc raises its mmap threshold to the size of each mapped block freed, so the second
    of two 8 MiB blocks came from an arena heap, and which blocks did depended on the order
    of the threads' frees (a server's RSS at 100,000 memories moved 383-433 MiB between
    starts). With the threshold fixed, every block over it is mapped on its own."""
    code = (
        "import ctypes\n"
        "from dreamwell.server.heap import _LIBC, MMAP_THRESHOLD, steady_malloc\n"
        "if _LIBC is None: print('skip'); raise SystemExit\n"
        "class Info(ctypes.Structure):\n"
        "    _fields_ = [(n, ctypes.c_size_t) for n in ('arena', 'ordblks', 'smblks',\n"
        "        'hblks', 'hblkhd', 'usmblks', 'fsmblks', 'uordblks', 'fordblks', 'keepcost')]\n"
        "libc = ctypes.CDLL(None)\n"
        "libc.mallinfo2.restype = Info\n"
        "libc.malloc.restype = ctypes.c_void_p\n"
        "libc.free.argtypes = [ctypes.c_void_p]\n"
        "steady_malloc()\n"
        "size = 2 * MMAP_THRESHOLD\n"
        "libc.free(libc.malloc(size))\n"
        "before = libc.mallinfo2().hblks\n"
        "block = libc.malloc(size)\n"
        "print(libc.mallinfo2().hblks - before)\n"
    )
    assert _printed(code) == "1", "the second big block did not get a mapping of its own"
