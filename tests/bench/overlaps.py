"""What overlapped the slowest operations of a run, for the benches that time phases beside
them (save_tail_bench.py in process, stdio_save_tail_bench.py over stdio): each operation and
each phase a (name, start, end) span on one clock."""

from __future__ import annotations

import statistics
from collections.abc import Callable

Span = tuple[str, float, float]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def show_slowest(
    timed: list[tuple[float, float]], spans: list[Span], say: Callable[[str], None], none: str
) -> None:
    """The five longest of `timed`, each with the ms of every span inside it (`none`: none)."""
    for a, b in sorted(timed, key=lambda ab: ab[0] - ab[1])[:5]:
        inside = [
            f"{n} {1000 * (min(b, e) - max(a, s)):.0f}" for n, s, e in spans if s < b and e > a
        ]
        say(f"    {1000 * (b - a):6.1f} ms  {', '.join(inside) or none}")


def show_spans(spans: list[Span], say: Callable[[str], None], kind: str) -> None:
    """Each kind of span: how many, p50, p99 and max (ms), the longest first."""
    by_name: dict[str, list[float]] = {}
    for n, s, e in spans:
        by_name.setdefault(n, []).append(1000 * (e - s))
    for n, values in sorted(by_name.items(), key=lambda kv: -max(kv[1])):
        say(
            f"  {kind} {n:28s} {len(values):6d}x  p50 {statistics.median(values):7.2f}  "
            f"p99 {pct(values, 0.99):7.1f}  max {max(values):7.1f} ms"
        )
