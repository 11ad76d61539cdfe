"""Every repository path that README.md and docs/*.md name exists.

A name counts as a repository path when it starts with one of the repository's own top-level
entries (stores/, server/, dream/, tests/, docs/, .ci/, README.md, LICENSE, pyproject.toml,
mcp.json), or is the target of a relative markdown link or image. Paths inside a user's data
directory (`lancedb/memories.lance`, `hooks/<session>.json`), URLs, `s3://…` locations and
`~/…` paths start with none of those, so they are never taken for repository paths."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = ("stores/", "server/", "dream/", "tests/", "docs/", ".ci/")
FILES = ("README.md", "LICENSE", "pyproject.toml", "mcp.json")

# a top-level entry at the start of a token: not after a letter, digit or one of . / ~ : - _ < {
# (so `~/.claude/...`, `s3://x/docs/`, `<data-dir>/tenants/` and `dreamwell.stores` are skipped)
_LEAD = r"(?<![\w./~:<{-])"
_NAMED = re.compile(
    _LEAD
    + r"((?:"
    + "|".join(re.escape(t) for t in TOP)
    + r")[\w./-]*"
    + r"|(?:"
    + "|".join(re.escape(f) for f in FILES)
    + r")(?![\w-]))"
)
# [text](target) and ![alt](target): a relative target, without its #anchor
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s#]*)(?:#[^)\s]*)?\)")
_WILDCARD = re.compile(r"[*<>{}]|\.\.\.|…")


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def named_paths(text: str, folder: Path) -> set[str]:
    """The repository paths a document in `folder` names, relative to the repository root."""
    names: set[str] = set()
    for match in _NAMED.finditer(text):
        name = match.group(1).rstrip(".,;:")
        end = match.end(1)
        if end < len(text) and (text[end] in "*<{…" or text[end : end + 3] == "..."):
            continue  # a pattern such as `tests/test_ui*.py` or `docs/<page>`, not one path
        names.add(name)
    for match in _LINK.finditer(text):
        target = match.group(1)
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):  # empty, or a URL
            continue
        resolved = (folder / target).resolve()
        names.add(
            resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else target
        )
    return {n for n in names if not _WILDCARD.search(n)}


def test_the_regex_finds_repository_paths_and_nothing_else() -> None:
    text = (
        "See `stores/longterm/wal.py`, `server/ui/`, tests/stores/skills and `.ci/run`; "
        "[recall](recall.md#hybrid-search), ![ui](ui.png), [LICENSE](../LICENSE), README.md.\n"
        "Not these: http://127.0.0.1:8765/mcp, `s3://bucket/prefix`, `~/.claude/settings.json`, "
        "`lancedb/memories.lance`, `hooks/<session>.json`, `<data-dir>/tenants/`, "
        "`dreamwell.stores.index`, `tests/test_ui*.py`, [site](https://example.com/docs/x).\n"
    )
    assert named_paths(text, ROOT / "docs") == {
        "stores/longterm/wal.py",
        "server/ui/",
        "tests/stores/skills",
        ".ci/run",
        "docs/recall.md",
        "docs/ui.png",
        "LICENSE",
        "README.md",
    }


def test_every_path_the_documentation_names_exists() -> None:
    missing = sorted(
        f"{doc.relative_to(ROOT)}: {name}"
        for doc in documents()
        for name in named_paths(doc.read_text(encoding="utf-8"), doc.parent)
        if not (ROOT / name).exists()
    )
    assert not missing, "paths named in the documentation that do not exist:\n" + "\n".join(missing)
