"""LanceDB is imported without the body of Lance's namespace REST client
(stores/longterm/lance_table.py): an embedded store never uses it, and it took half of LanceDB's
import time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROBE = """
import json, sys
from pathlib import Path
from dreamwell.stores.model import MemoryEntry, new_id, utcnow
from dreamwell.stores.longterm.lance_table import MemoryTable
table = MemoryTable(Path(sys.argv[1]))
now = utcnow()
table.upsert([(MemoryEntry(new_id(), "kept", "t/x", (), now, now, now), None)])
api = "lance_namespace_urllib3_client.api"
seen = {"rows": table.count(), "api_after_open": api in sys.modules}
import lance_namespace_urllib3_client as client
seen["asked"] = client.ApiClient.__name__  # a name of the package itself: its body runs now
seen["api_after_asking"] = api in sys.modules
print(json.dumps(seen))
"""


def test_namespace_client_body_runs_only_when_asked(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "lancedb")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "rows": 1,
        "api_after_open": False,
        "asked": "ApiClient",
        "api_after_asking": True,
    }
