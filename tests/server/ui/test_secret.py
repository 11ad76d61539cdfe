"""`dreamwell ui` answers only whoever holds the token it printed (issue 53, HIGH 3): another
local user read every memory through its API, scraped the CSRF token from the public page and
archived one. Now every request without the cookie or the bearer token is refused."""

from __future__ import annotations

from pathlib import Path

import httpx2

from dreamwell.stores import LongTermStore
from tests.support.other_user import as_other_user, other_user_or_skip
from tests.support.ui_browser import base_of, bearer_of, csrf_of, seed, ui_process

# as uid 65534: the page, the API, the page's files, a guessed token, and an archive posted with
# a CSRF token taken from the page if it shows one; every status
_ATTACK = """
import json, re, sys, urllib.request, urllib.error
base, target = sys.argv[1], sys.argv[2]
def status(path, data=None, headers={}):
    request = urllib.request.Request(base + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
got = {}
got["page"], page = status("")
got["memories"], listed = status("ui/api/memories")
got["script"], _ = status("ui/static/ui.js")
got["guess"], _ = status("?token=guess")
got["bearer"], _ = status("ui/api/memories", headers={"authorization": "Bearer guess"})
found = re.search('name="dreamwell-csrf" content="([^"]+)"', page)
headers = {"content-type": "application/json", "x-dreamwell-csrf": found.group(1) if found else ""}
got["archive"], _ = status(f"ui/api/memories/{target}/archive", b"{}", headers)
got["leaked"] = "Chicago" in page + listed
print(json.dumps(got))
"""


def test_another_user_is_refused_everything_and_the_printed_address_opens_it(
    tmp_path: Path,
) -> None:
    other_user_or_skip()
    data = tmp_path / "data"
    target = seed(data)["tz"]
    with ui_process(data) as url:
        base = base_of(url)
        attack = as_other_user(_ATTACK, base, target.id)
        assert attack == {
            "page": 401,
            "memories": 401,
            "script": 401,
            "guess": 401,
            "bearer": 401,
            "archive": 401,
            "leaked": False,
        }
        assert LongTermStore(data, embedder=None).get(target.id).archived_at is None  # type: ignore[union-attr]

        with httpx2.Client(timeout=60) as http:
            refused = http.get(f"{base}ui/api/memories")
            assert refused.status_code == 401 and "dreamwell ui" in refused.json()["error"]
            opened = http.get(url)  # the printed address: a cookie, then the page without it
            assert opened.status_code == 303 and opened.headers["location"] == "/"
            cookie = opened.headers["set-cookie"].lower()
            assert "httponly" in cookie and "samesite=strict" in cookie
            page = http.get(base)
            assert page.status_code == 200
            csrf = {"x-dreamwell-csrf": csrf_of(page.text)}
            assert len(http.get(f"{base}ui/api/memories").json()["memories"]) == 4
            archive = f"{base}ui/api/memories/{target.id}/archive"
            assert http.post(archive, json={}).status_code == 403  # the CSRF check still holds
            assert http.post(archive, json={}, headers=csrf).status_code == 200
        with httpx2.Client(timeout=60, headers=bearer_of(url)) as program:
            listed = program.get(f"{base}ui/api/memories").json()["memories"]
            assert target.id not in {m["id"] for m in listed}  # archived: not live
