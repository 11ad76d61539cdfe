"""Which project a directory is in (docs/projects.md), read from `.git` on disk."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from dreamwell.stores import (
    Project,
    is_global,
    normalise_remote,
    pinned_project,
    project_of,
    project_of_uri,
)
from tests.support.repos import make_repo, make_submodule, make_worktree


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:acme/shop.git",
        "https://github.com/acme/shop",
        "https://github.com/acme/shop.git/",
        "ssh://git@github.com/acme/shop",
        "ssh://git@github.com:22/acme/shop.git",
        "https://deploy:s3cret@GitHub.com/acme/shop.git",
        "git+ssh://git@github.com/acme/shop.git",
    ],
)
def test_every_spelling_of_one_remote_is_one_key(url: str) -> None:
    assert normalise_remote(url) == "github.com/acme/shop"


def test_a_key_never_holds_the_credentials_of_the_url() -> None:
    assert "s3cret" not in normalise_remote("https://me:s3cret@gitlab.example.com/g/p.git")


def test_a_repository_is_keyed_by_its_origin_and_named_by_its_folder(tmp_path: Path) -> None:
    top = make_repo(
        tmp_path / "shop",
        {"upstream": "git@github.com:x/y.git", "origin": "git@github.com:acme/shop.git"},
    )
    (top / "src" / "deep").mkdir(parents=True)
    found = project_of(top / "src" / "deep")
    assert found is not None
    assert (found.key, found.name, found.root) == ("github.com/acme/shop", "shop", top.resolve())


def test_without_origin_the_first_remote_keys_it(tmp_path: Path) -> None:
    top = make_repo(
        tmp_path / "a", {"upstream": "https://github.com/x/y", "fork": "https://github.com/me/y"}
    )
    assert project_of(top).key == "github.com/x/y"  # type: ignore[union-attr]


def test_two_clones_of_one_repository_are_one_project(tmp_path: Path) -> None:
    one = make_repo(tmp_path / "alice" / "shop", {"origin": "git@github.com:acme/shop.git"})
    two = make_repo(tmp_path / "bob" / "code", {"origin": "https://github.com/acme/shop"})
    assert project_of(one).key == project_of(two).key  # type: ignore[union-attr]


def test_a_repository_without_remote_is_keyed_by_its_top_level_path(tmp_path: Path) -> None:
    top = make_repo(tmp_path / "local")
    (top / "sub").mkdir()
    assert project_of(top / "sub").key == str(top.resolve())  # type: ignore[union-attr]


def test_a_worktree_shares_its_repository_s_project(tmp_path: Path) -> None:
    main = make_repo(tmp_path / "main", {"origin": "git@github.com:acme/shop.git"})
    tree = make_worktree(main, tmp_path / "trees" / "feature", "feature")
    found = project_of(tree)
    assert found is not None
    assert found.key == "github.com/acme/shop" and found.root == tree.resolve()
    local = make_repo(tmp_path / "plain")
    other = make_worktree(local, tmp_path / "plain-fix", "fix")
    assert project_of(other).key == str(local.resolve())  # type: ignore[union-attr]


def test_a_submodule_is_its_own_project(tmp_path: Path) -> None:
    parent = make_repo(tmp_path / "app", {"origin": "git@github.com:acme/app.git"})
    sub = make_submodule(parent, "vendor/lib", "https://github.com/acme/lib.git")
    assert project_of(sub).key == "github.com/acme/lib"  # type: ignore[union-attr]
    assert project_of(parent / "vendor").key == "github.com/acme/app"  # type: ignore[union-attr]


def test_a_directory_outside_any_repository_is_no_project(tmp_path: Path) -> None:
    assert project_of(tmp_path) is None
    assert project_of("/") is None
    assert project_of(None) is None
    assert project_of(tmp_path / "missing") is None


def test_a_repository_at_the_home_directory_is_no_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = make_repo(tmp_path / "home", {"origin": "git@github.com:me/dotfiles.git"})
    (home / "notes").mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert project_of(home / "notes") is None


def test_a_root_is_a_file_uri(tmp_path: Path) -> None:
    top = make_repo(tmp_path / "with space", {"origin": "git@github.com:acme/shop.git"})
    assert project_of_uri(top.as_uri()).key == "github.com/acme/shop"  # type: ignore[union-attr]
    assert project_of_uri("https://example.com/x") is None


def test_a_pinned_project_is_a_directory_or_a_key(tmp_path: Path) -> None:
    top = make_repo(tmp_path / "shop", {"origin": "git@github.com:acme/shop.git"})
    assert pinned_project(str(top)).key == "github.com/acme/shop"
    assert pinned_project(str(tmp_path)).key == str(tmp_path.resolve())
    assert pinned_project("git@github.com:acme/shop.git").key == "github.com/acme/shop"
    assert pinned_project("billing").key == "billing"


def test_preferences_anti_patterns_and_people_are_global() -> None:
    for category in ("user-preferences/go", "preferences", "anti-patterns/git", "people/ana"):
        assert is_global(category)
    assert not is_global("deploy") and not is_global(None) and not is_global("peoplex")
    assert is_global("team/style", ["team"])


def _within(seconds: float, fn: Callable[[], object]) -> object:
    """fn() run on a thread, failing the test (not hanging it) if it has not ended in time."""
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert done, f"still reading after {seconds} s"
    return done[0]


def test_a_malformed_remote_url_is_no_project_said_once_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """qa-turn5 LOW 11: `https://[bad/acme/x` raised ValueError (Invalid IPv6 URL) out of
    every tool call and hook started there."""
    repo = make_repo(tmp_path / "bad", {"origin": "https://[bad/acme/x"})
    (repo / "src").mkdir()
    with caplog.at_level(logging.WARNING, "dreamwell.stores.projects"):
        assert project_of(repo / "src") is None
        assert project_of(repo / "src") is None  # cached: said once
    [line] = [r.getMessage() for r in caplog.records]
    assert "remote URL 'https://[bad/acme/x' cannot be read" in line and "no project" in line
    assert pinned_project("https://[bad/acme/x").key == "https://[bad/acme/x"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_git_file_that_is_not_regular_is_never_waited_on_nor_read(
    tmp_path: Path, kind: str
) -> None:
    """qa-turn5 LOW 11 / MEDIUM 7: a FIFO `.git/config` blocked every hook and tool call; one
    linked to /dev/zero was read until memory ran out. The repository is still a project,
    keyed by its path (its remote cannot be read)."""
    repo = make_repo(tmp_path / kind, {"origin": "git@github.com:acme/shop.git"})
    config = repo / ".git" / "config"
    config.unlink()
    if kind == "fifo":
        os.mkfifo(config)
    else:
        config.symlink_to("/dev/zero")
    found = _within(10, lambda: project_of(repo))
    assert isinstance(found, Project) and found.key == str(repo)


def test_a_huge_git_config_is_read_only_up_to_its_bound(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "big")
    config = repo / ".git" / "config"
    with config.open("a") as out:  # a sparse 64 MiB file, then a remote past the bound
        out.truncate(64 * 1024**2)
    with config.open("a") as out:
        out.write('\n[remote "origin"]\n\turl = git@github.com:acme/far.git\n')
    found = _within(10, lambda: project_of(repo))
    assert isinstance(found, Project) and found.key == str(repo)
