"""Layers point one way: server → dream → stores, server → stores; nothing imports server."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import ROOT

ALLOWED = {
    "stores": {"stores"},
    "dream": {"dream", "stores"},
    "server": {"server", "dream", "stores"},
}
HOMES = {
    "tantivy": {"stores/index/text_index.py"},
    "lancedb": {"stores/longterm/lance_table.py"},
    "pyarrow": {"stores/longterm/lance_table.py"},
    "onnxruntime": {"stores/index/embedders.py"},
    "sqlite3": {"stores/hooks/quick_recall.py"},
    "obstore": {"stores/remote/blobs.py"},
}


def imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:
            names.append("<relative>")
    return names


def test_imports_follow_the_layers_and_are_absolute() -> None:
    wrong = []
    for layer, allowed in ALLOWED.items():
        for path in (ROOT / layer).rglob("*.py"):
            for name in imports(path):
                parts = name.split(".")
                bare = name == "<relative>" or parts[0] in ALLOWED
                upward = parts[0] == "dreamwell" and len(parts) > 1 and parts[1] not in allowed
                if bare or upward:
                    wrong.append(f"{path.relative_to(ROOT)}: {name}")
    assert wrong == []


def test_each_third_party_storage_library_has_one_home() -> None:
    wrong = []
    for layer in ALLOWED:
        for path in (ROOT / layer).rglob("*.py"):
            rel = str(path.relative_to(ROOT))
            for name in imports(path):
                home = HOMES.get(name.split(".")[0])
                if home is not None and rel not in home:
                    wrong.append(f"{rel}: {name}")
    assert wrong == []


def test_only_the_server_speaks_mcp_and_reads_the_environment() -> None:
    wrong = []
    for layer in ("stores", "dream"):
        for path in (ROOT / layer).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if any(n.split(".")[0] in ("mcp", "uvicorn", "starlette") for n in imports(path)):
                wrong.append(str(path))
            if "os.environ[" in text or "os.getenv" in text or "environ.get" in text:
                wrong.append(str(path))
    assert wrong == []


def test_the_dream_reaches_storage_only_through_the_stores_public_names() -> None:
    """`dreamwell.stores`'s `__all__` is the layer's interface (STYLE.md): the dream imports
    no module inside it (the lazy-export helper aside, which is how dream/ builds its own)."""
    wrong = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / "dream").rglob("*.py")
        for name in imports(path)
        if name.startswith("dreamwell.stores.") and name != "dreamwell.stores.lazy_exports"
    ]
    assert wrong == []
