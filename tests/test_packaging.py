"""The wheel users install carries what runs offline: the embedded model with its licence and
notice, and the memory browser's page, script and style."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support import ROOT


def test_the_wheel_carries_the_model_its_licences_and_the_browser_files(tmp_path: Path) -> None:
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    subprocess.run(
        [*pip, "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("dreamwell-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    model = "dreamwell/stores/index/models/minilm-l6-v2-int8/"
    for name in ("model.onnx", "tokenizer.json", "reference.json", "LICENSE", "NOTICE"):
        assert model + name in names, name
    for name in ("ui.html", "ui.js", "ui.css"):
        assert f"dreamwell/server/ui/static/{name}" in names, name
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "dreamwell = dreamwell.server.cli.main:run" in text
    assert not any(n.startswith(("tests/", "server/", "stores/", "dream/")) for n in names)
