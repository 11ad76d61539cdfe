"""Cheap package imports (PEP 562): a package lists which module defines each of its names,
and a name's module is imported on first access, so importing the package pulls in no heavy
library until a name that needs one is used."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, defined_in: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose name -> module table is
    `defined_in` (module names relative to the package)."""

    def __getattr__(name: str) -> Any:
        module = defined_in.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        qualified = f"{package}.{module}"
        __import__(qualified)  # what an import statement calls, so `-X importtime` reports it
        value = getattr(sys.modules[qualified], name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(defined_in))

    return __getattr__, __dir__
