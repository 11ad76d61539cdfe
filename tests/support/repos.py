"""Git repositories for the project tests, written by hand: a `.git` directory with a config
naming remotes, a worktree's `.git` file, a submodule's. No `git` process is needed to read
them (stores/projects.py reads `.git` itself), and none is run to make them."""

from __future__ import annotations

from pathlib import Path

from mcp.types import ListRootsResult, Root


def make_repo(top: Path, remotes: dict[str, str] | None = None) -> Path:
    """A repository at `top` whose config names `remotes` (name -> url), in that order."""
    git = top / ".git"
    (git / "refs" / "heads").mkdir(parents=True, exist_ok=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    lines = ["[core]", "\trepositoryformatversion = 0", "\tbare = false"]
    for name, url in (remotes or {}).items():
        lines += [
            f'[remote "{name}"]',
            f"\turl = {url}",
            f"\tfetch = +refs/heads/*:refs/remotes/{name}/*",
        ]
    (git / "config").write_text("\n".join(lines) + "\n")
    return top


def make_worktree(main: Path, top: Path, name: str) -> Path:
    """A linked worktree of `main` at `top`, as `git worktree add` lays it out."""
    admin = main / ".git" / "worktrees" / name
    admin.mkdir(parents=True)
    (admin / "commondir").write_text("../..\n")
    (admin / "gitdir").write_text(str(top / ".git") + "\n")
    top.mkdir(parents=True, exist_ok=True)
    (top / ".git").write_text(f"gitdir: {admin}\n")
    return top


def make_submodule(parent: Path, path: str, url: str) -> Path:
    """A submodule of `parent` at `path`, its git directory under `.git/modules/`."""
    modules = parent / ".git" / "modules" / path
    modules.mkdir(parents=True)
    (modules / "config").write_text(f'[remote "origin"]\n\turl = {url}\n')
    top = parent / path
    top.mkdir(parents=True, exist_ok=True)
    depth = "/".join([".."] * len(Path(path).parts))
    (top / ".git").write_text(f"gitdir: {depth}/.git/modules/{path}\n")
    return top


class Roots:
    """A client's roots, changeable mid-session: `callback` answers `roots/list` with the
    folders now in `folders` as `file://` URIs."""

    def __init__(self, *folders: Path) -> None:
        self.folders = list(folders)
        self.asked = 0

    async def callback(self, _context: object) -> ListRootsResult:
        self.asked += 1
        return ListRootsResult(roots=[Root(uri=f.as_uri(), name=f.name) for f in self.folders])  # type: ignore[arg-type]


def two_projects(base: Path) -> tuple[Path, Path]:
    """Two repositories whose remotes differ (`acme/shop` over ssh, `acme/billing` over https)."""
    return (
        make_repo(base / "shop", {"origin": "git@github.com:acme/shop.git"}),
        make_repo(base / "billing", {"origin": "https://github.com/acme/billing.git"}),
    )
