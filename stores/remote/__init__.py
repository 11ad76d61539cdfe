"""A data directory on object storage (`s3://bucket/prefix`, also `gs://`, `az://`).

Owns the location and its options (location.py: the URI, the local cache's marker, error
texts) and the one object-store client with compare-and-set objects (blobs.py, the only
module that imports obstore; `attach` marks a cache as a location's cache).

May import: the stores root only (model, errors, files).

Importing the package is cheap: each name loads its module on first use (PEP 562)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dreamwell.stores.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from dreamwell.stores.remote.blobs import CREATE, Blobs, Conflict, attach
    from dreamwell.stores.remote.location import Remote, cache_path, describe, is_uri, parse

_LAZY = {
    **dict.fromkeys(
        [
            "Remote",
            "cache_path",
            "describe",
            "is_uri",
            "parse",
        ],
        "location",
    ),
    **dict.fromkeys(
        [
            "CREATE",
            "Blobs",
            "Conflict",
            "attach",
        ],
        "blobs",
    ),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "CREATE",
    "Blobs",
    "Conflict",
    "Remote",
    "attach",
    "cache_path",
    "describe",
    "is_uri",
    "parse",
]
