"""A job's progress marker is shown while the job holds its lock, and only then."""

from __future__ import annotations

import json
from pathlib import Path

from dreamwell.stores import DataDir
from dreamwell.stores.progress import progress_of, report_progress


def test_progress_is_shown_while_reported_and_gone_after(tmp_path: Path) -> None:
    dirs = DataDir(tmp_path)
    with report_progress(dirs.import_progress, dirs.import_lock) as report:
        report(5, 10)
        shown = progress_of(dirs.import_progress, dirs.import_lock)
        assert shown is not None and (shown["done"], shown["total"]) == (5, 10)
    assert progress_of(dirs.import_progress, dirs.import_lock) is None
    assert not dirs.import_progress.exists()


def test_a_marker_left_by_a_dead_job_is_not_shown(tmp_path: Path) -> None:
    """Its lock went with its process: the marker is stale, whatever pid it names."""
    dirs = DataDir(tmp_path)
    dirs.import_progress.write_text(json.dumps({"pid": 1, "done": 1, "total": 2}))
    assert progress_of(dirs.import_progress, dirs.import_lock) is None
    dirs.import_progress.write_text("{half")
    assert progress_of(dirs.import_progress, dirs.import_lock) is None
