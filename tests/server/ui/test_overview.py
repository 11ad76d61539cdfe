"""The browser's overview shows what the client hooks did lately (sessions, prompts recalled
for, memories fed in, failures), read from what the hooks keep, and refreshes it live when a
real `dreamwell hook` process runs beside the page, without losing what the person types."""

from __future__ import annotations

from pathlib import Path

from dreamwell.server.hooks.stats import hook_activity
from dreamwell.stores.layout import DataDir
from tests.support.hooks import DEPLOY, hook, prompt, seeded
from tests.support.ui_browser import chromium, open_page, serious_violations, shot, ui_process


def summary_for(data: Path) -> str:
    """What the page must say, from the hooks' own files."""
    h = hook_activity(DataDir(data)).to_json()
    n = lambda k, one, many: f"{h[k]} {one if h[k] == 1 else many}"  # noqa: E731
    return (
        f"Client hooks, last 24 h: {n('sessions', 'session', 'sessions')}, "
        f"{n('recalls', 'prompt', 'prompts')} recalled for, "
        f"{n('memories', 'memory', 'memories')} fed in, {n('failures', 'failure', 'failures')}"
    )


def test_the_overview_shows_the_hooks_activity_live(tmp_path: Path) -> None:
    seeded(tmp_path)
    with ui_process(tmp_path) as url, chromium() as browser:
        page = open_page(browser, url, 1280, 800, bypass_csp=True)
        page.wait_for_selector("#hooks p:text-is('No client hook has run yet.')")
        page.fill("#q", "half-typed search")
        done = hook("user-prompt", prompt("s1", "how do I deploy the api?"), tmp_path)
        assert DEPLOY in done.stdout
        hook("user-prompt", prompt("s2", "and the tea?", cwd="/work/other"), tmp_path)
        expected = summary_for(tmp_path)
        assert expected.startswith("Client hooks, last 24 h: 2 sessions, 2 prompts recalled")
        assert ", 0 memories fed in" not in expected
        page.wait_for_selector(f"#hooks summary:text('{expected}')")  # no reload: polled
        hook("user-prompt", b"{broken", tmp_path)  # a failure, logged to hooks.log
        expected = summary_for(tmp_path)
        assert expected.endswith(", 1 failure")
        page.wait_for_selector(f"#hooks summary:text('{expected}')")
        assert page.locator("#hooks summary .bad").inner_text() == "1 failure"
        assert page.input_value("#q") == "half-typed search"  # typing survives the refresh
        page.locator("#hooks summary").click()
        rows = page.locator("#hooks li").all_inner_texts()
        assert any(r.startswith("claude-code s1 in /work/proj: 1 turn recorded") for r in rows)
        assert any("s2 in /work/other" in r for r in rows), rows
        failure = page.locator("#hooks p.bad").last.inner_text()
        assert "user-prompt failed" in failure and "not JSON" in failure
        shot(page, "ui-overview-hooks-1280")
        found = serious_violations(page)
        assert found == [], "\n".join(found)
        page.set_viewport_size({"width": 390, "height": 800})
        page.emulate_media(color_scheme="dark")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        shot(page, "ui-overview-hooks-dark-390", full=True)
        found = serious_violations(page)
        assert found == [], "\n".join(found)
