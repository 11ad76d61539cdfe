"""Which project each call belongs to (docs/projects.md), without MCP: the pinned `project` setting,
the roots a client declared (per connection, kept here), else a hook's `cwd` or this process's
working directory. What a directory's project is, and which memories are global, is
`stores/projects.py`'s; this module holds the choice between the sources and what a save
records (`scope_metadata`)."""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable
from typing import Any
from weakref import WeakKeyDictionary

from dreamwell.server.config import Settings
from dreamwell.stores import (
    PROJECT,
    PROJECT_NAME,
    Project,
    is_global,
    pinned_project,
    project_of,
    project_of_uri,
)


def first_root_project(uris: Iterable[str]) -> Project | None:
    """The project of the first `file://` root (the others are folders beside it)."""
    for uri in uris:
        if uri.startswith("file:"):
            return project_of_uri(uri)
    return None


class CallerProjects:
    """The project of each caller: pinned, else its connection's roots, else `cwd`."""

    def __init__(self, settings: Settings) -> None:
        self.pinned = pinned_project(settings.project) if settings.project else None
        self.global_categories = settings.global_category_list()
        self._process: tuple[Project | None] | None = None
        # per client connection (dropped with it): the project of its first `file://` root
        self._roots: WeakKeyDictionary[Any, Project | None] = WeakKeyDictionary()

    def process(self) -> Project | None:
        """The project of this process's working directory (read once)."""
        if self._process is None:
            try:
                here: str | None = os.getcwd()
            except OSError:  # the directory was removed under us
                here = None
            self._process = (project_of(here),)
        return self._process[0]

    def knows_roots(self, connection: Hashable) -> bool:
        return connection in self._roots

    def set_roots(self, connection: Hashable, uris: Iterable[str]) -> None:
        """The roots `connection` declared (None when it has no `file://` root)."""
        self._roots[connection] = first_root_project(uris)

    def forget_roots(self, connection: Hashable) -> None:
        """`roots/list_changed`: ask the connection again at its next call."""
        self._roots.pop(connection, None)

    def of(self, connection: Hashable | None = None, cwd: str | None = None) -> Project | None:
        """The caller's project: pinned, its roots' project, `cwd`'s, else the process's."""
        if self.pinned is not None:
            return self.pinned
        if connection is not None and (found := self._roots.get(connection)) is not None:
            return found
        if cwd:
            return project_of(cwd)
        return self.process()

    def scope_metadata(self, project: Project | None, category: str | None) -> dict[str, str]:
        """What a save records of its project: nothing for a global memory or a caller in
        no project."""
        if project is None or is_global(category, self.global_categories):
            return {}
        return {PROJECT: project.key, PROJECT_NAME: project.name}
