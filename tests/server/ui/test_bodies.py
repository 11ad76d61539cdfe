"""The standalone browser's API bodies (issue 45): a body over the cap is refused with 413
before it is all read, and JSON nested too deep for the parser is a 400, never a 500."""

from __future__ import annotations

from pathlib import Path

import httpx2

from dreamwell.server.ui.app import MAX_BODY_BYTES
from tests.support.ui_browser import base_of, bearer_of, csrf_of, seed, ui_process


def test_an_oversized_or_deeply_nested_body_is_refused_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seed(data)
    with ui_process(data) as url, httpx2.Client(timeout=60, headers=bearer_of(url)) as http:
        headers = {"x-dreamwell-csrf": csrf_of(http.get(base_of(url)).text)}
        headers["content-type"] = "application/json"
        api = f"{base_of(url)}ui/api/memories"
        big = http.post(api, content=b" " * (MAX_BODY_BYTES + 1), headers=headers)
        assert big.status_code == 413 and "over" in big.json()["error"]
        nested = http.post(api, content=b"[" * 400_000 + b"]" * 400_000, headers=headers)
        assert nested.status_code == 400 and nested.json()["error"] == "expected a JSON object"
        fine = http.post(api, json={"content": "still works"}, headers=headers)
        assert fine.status_code == 200, fine.text
