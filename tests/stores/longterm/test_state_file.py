"""stores/longterm/state.py: the checkpoint journal stays small however much is checkpointed."""

from __future__ import annotations

from pathlib import Path

from dreamwell.stores.longterm.state import _JOURNAL_TOTAL_IDS, StateFile


def test_the_journal_names_a_bounded_number_of_ids_and_says_so_for_older_checkpoints(
    tmp_path: Path,
) -> None:
    state_file = StateFile(tmp_path / "longterm.state")
    state = state_file.read()
    for g in range(12):  # 12 checkpoints of 4,000 ids: 48,000 in all
        state = state_file.write(state, g + 1, g + 1, {f"g{g}-{i}" for i in range(4000)})
    read = StateFile(tmp_path / "longterm.state").read()
    assert read.generation == 12 and read.checkpoint == 12
    named = sum(len(ids or ()) for ids in read.journal.values())
    assert 0 < named <= _JOURNAL_TOTAL_IDS
    assert (tmp_path / "longterm.state").stat().st_size < 30 * _JOURNAL_TOTAL_IDS
    recent = read.changed_since(12 - 5)  # the newest five checkpoints: 20,000 ids
    assert recent == {f"g{g}-{i}" for g in range(7, 12) for i in range(4000)}
    assert read.changed_since(12 - 6) is None  # further back: "reload everything"
    assert read.written_after(6) is None and read.written_after(7) == recent
