"""The automatic dream's back-off after failed cycles (dream/backoff.py): doubled for each
failed cycle in a row, capped, cleared by a cycle whose LLM answered, and a damaged state
file read as no failures."""

from __future__ import annotations

from pathlib import Path

from dreamwell.dream import backoff
from dreamwell.stores import DataDir

DAY = 86400.0


def test_the_wait_doubles_per_failed_cycle_and_stops_at_a_week_or_the_setting() -> None:
    assert [backoff.wait(60.0, n) for n in range(4)] == [60.0, 120.0, 240.0, 480.0]
    assert backoff.wait(DAY, 2) == 4 * DAY and backoff.wait(DAY, 3) == 7 * DAY
    assert backoff.wait(DAY, 10_000) == 7 * DAY  # no overflow, the cap
    assert backoff.wait(30 * DAY, 1) == 30 * DAY  # a setting longer than the cap stays


def test_failures_add_up_until_an_answer_clears_them_and_a_damaged_file_counts_none(
    tmp_path: Path,
) -> None:
    assert backoff.read(tmp_path).failures == 0
    backoff.record(tmp_path, "HTTP 429")
    state = backoff.record(tmp_path, "HTTP 529")
    assert (state.failures, state.cause) == (2, "HTTP 529")
    assert backoff.read(tmp_path) == state
    backoff.record(tmp_path, "")
    assert backoff.read(tmp_path).failures == 0
    assert not DataDir(tmp_path).dream_backoff.exists()
    DataDir(tmp_path).dream_backoff.write_text("{not json")
    assert backoff.read(tmp_path).failures == 0
    assert backoff.record(tmp_path, "timed out").failures == 1
