"""README's pictures of the memory browser (development only): `docs/ui.png` (the Memories view
with its overview) and `docs/ui-skills.png` (the Skills view), 1280 x 800, light theme.

    python -m tests.dev.docs_screenshots

A data directory in a temporary folder gets a few everyday memories, skills, a dream run by
the scripted LLM of tests/support/fake_openai.py and client hooks that ran; `dreamwell ui` on it is
shot in Debian's Chromium. Each image is checked to stay under 200 KB."""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from dreamwell.server.hooks.refresh import refresh
from dreamwell.stores import MemoryEntry, new_id, utcnow
from dreamwell.stores.layout import DataDir
from tests.support.dreams import dreamt
from tests.support.hooks import hook, prompt
from tests.support.ui_browser import chromium, open_page, ui_process

ROOT = Path(__file__).resolve().parents[2]
MAX_BYTES = 200_000
EVERYDAY = [  # (text, category, tags, days old, importance)
    (
        "Billing deploys with `make deploy` from the repo root; it takes about 5 minutes",
        "projects/billing",
        ("deploy",),
        1,
        0.8,
    ),
    ("Works in UTC-6; stand-up is at 9:30 local time", "user/schedule", (), 2, 0.6),
    (
        "API keys live in 1Password, vault Engineering; never paste them into chat",
        "user/security",
        ("secrets",),
        3,
        0.9,
    ),
    (
        "The staging database is reset every Sunday at 02:00 UTC",
        "projects/billing",
        ("staging",),
        4,
        0.5,
    ),
    ("Uses Neovim with LazyVim and prefers keyboard-driven tools", "user/tools", (), 6, 0.4),
    (
        "The web front end is SvelteKit in web/; `pnpm dev` serves it on port 5173",
        "projects/web",
        (),
        7,
        0.5,
    ),
    (
        "Release notes go under Unreleased in CHANGELOG.md before tagging",
        "projects/billing",
        ("release",),
        9,
        0.7,
    ),
    (
        "Wants tests that run without network access, with pytest",
        "user-preferences/testing",
        (),
        11,
        0.7,
    ),
]


def seed(data: Path) -> None:
    now = utcnow()
    entries = []
    for text, category, tags, days, importance in EVERYDAY:
        when = now - timedelta(days=days)
        entry = MemoryEntry(new_id(), text, category, tags, when, when, when)
        entries.append(replace(entry, importance=importance))
    store = dreamt(data)
    store.apply(entries)
    store.checkpoint()
    refresh(DataDir(data))
    hook("user-prompt", prompt("4f1c9a", "how do I deploy billing?"), data)
    hook("user-prompt", prompt("77b2e0", "when is stand-up?", cwd="/home/me/web"), data)


def shoot(data: Path) -> list[Path]:
    images = [ROOT / "docs" / "ui.png", ROOT / "docs" / "ui-skills.png"]
    with ui_process(data) as url, chromium() as browser:
        page = open_page(browser, url, 1280, 800, color_scheme="light")
        page.wait_for_selector("#hooks summary")
        page.screenshot(path=str(images[0]))
        page.click("#views [data-view='skills']")
        page.click("#skills button[data-name='cut-release']")
        page.wait_for_selector("#skill pre.skill-md")
        page.screenshot(path=str(images[1]))
    return images


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        seed(data)
        images = shoot(data)
    for image in images:
        size = image.stat().st_size
        sys.stdout.write(f"{image.relative_to(ROOT)}: {size:,} bytes\n")
        if size >= MAX_BYTES:
            sys.stderr.write(f"  over {MAX_BYTES:,} bytes: shrink it\n")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
