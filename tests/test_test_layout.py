"""The tests' own layout (issue 41, criterion 4): tests/stores, tests/server and tests/dream
mirror the source packages, and no test module imports another test module or a conftest:
what tests share is in tests/support, imported as `tests.support…`."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support import ROOT

TESTS = ROOT / "tests"
HERE = Path(__file__).resolve()  # its strings show what the others must not hold
MIRRORED = ("stores", "server", "dream")  # tests/X/... mirrors the source package X/...
# code run in a subprocess from a string (python -c ...) imports like a module does
IN_STRINGS = re.compile(r"^\s*(?:from|import)\s+tests\.([\w.]+)", re.M)


def modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def allowed(module: str, path: Path) -> bool:
    """`tests.support…`, and a bench script's sibling under tests/bench."""
    parts = module.split(".")
    if parts[0] != "tests":
        return True
    if len(parts) > 1 and parts[1] == "support":
        return True
    return len(parts) > 1 and parts[1] == "bench" and path.is_relative_to(TESTS / "bench")


def bad_imports(path: Path, source: str | None = None) -> list[str]:
    """The imports of tests.X (X not support) in the module at `path` (its text: `source`)."""
    source = path.read_text() if source is None else source
    tree = ast.parse(source, str(path))
    bad: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names if not allowed(a.name, path)]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level and not path.is_relative_to(TESTS / "support"):
                bad.append("." * node.level + module)
            elif module == "tests":  # from tests import X: X is a module of tests/
                bad += [
                    f"tests.{a.name}" for a in node.names if not allowed(f"tests.{a.name}", path)
                ]
            elif not allowed(module, path):
                bad.append(module)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and path != HERE:
            found = (f"tests.{m}" for m in IN_STRINGS.findall(node.value))
            bad += [m for m in found if not allowed(m, path)]
    return [f"{path.relative_to(ROOT)}: {m}" for m in bad]


def test_no_test_module_imports_another_or_a_conftest() -> None:
    assert (TESTS / "support" / "__init__.py").is_file()
    bad = [line for path in modules() for line in bad_imports(path)]
    assert bad == [], "import from tests.support instead:\n" + "\n".join(bad)


def test_the_checker_sees_each_kind_of_import_it_forbids() -> None:
    probe = TESTS / "stores" / "probe.py"  # never written: judged as if it stood there
    cases = {
        "from tests.conftest import ok": ["tests.conftest"],
        "from tests import conftest, support": ["tests.conftest"],
        "import tests.test_cli": ["tests.test_cli"],
        "from tests.server.ui.test_browser import seed": ["tests.server.ui.test_browser"],
        "from .test_store import x": [".test_store"],
        "CODE = '''\nfrom tests.test_recall import HashEmbedder\n'''": ["tests.test_recall"],
        "from tests.support.cli import dreamwell\nimport tests.support.calls": [],
    }
    for source, expected in cases.items():
        found = [line.split(": ", 1)[1] for line in bad_imports(probe, source)]
        assert found == expected, source


def test_every_test_folder_mirrors_a_source_package() -> None:
    strays = []
    for top in MIRRORED:
        assert (TESTS / top).is_dir(), f"tests/{top} is missing"
        for folder in [TESTS / top, *(TESTS / top).rglob("*")]:
            if not folder.is_dir() or folder.name == "__pycache__":
                continue
            source = ROOT / folder.relative_to(TESTS)
            if not (source / "__init__.py").is_file():
                strays.append(str(folder.relative_to(ROOT)))
    assert strays == [], "test folders with no source package of that path: " + ", ".join(strays)
