"""The architecture, checked from the source (ast, nothing imported but the doors' tables):
layers point one way (server → dream → stores, server → stores; nothing imports server), no
import circles between modules, each sub-package has a door, server and dream use only the
stores' public names, each third-party library has one home, and the MCP SDK's private
attributes are touched in one module. Inside server/, its packages form a stack (server's
door's STACK, no import up, no ring) and each package's door lists, as data (MAY_IMPORT),
exactly what its modules import from outside it."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path

from tests.support import ROOT

LAYERS = {"stores": "dreamwell.stores", "dream": "dreamwell.dream", "server": "dreamwell.server"}
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
SDK_MODULE = "server/mcp/sdk.py"
MAX_MODULES_AT_A_ROOT = 20
MAX_CLASS_LINES, MAX_FUNCTION_LINES = 300, 60


def sources() -> Iterator[Path]:
    for layer in LAYERS:
        yield from sorted((ROOT / layer).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([LAYERS[parts[0]], *parts[1:]])


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def type_checking_only(module: ast.Module) -> set[int]:
    """The ids of the nodes under `if TYPE_CHECKING:` (imports that never run)."""
    skip: set[int] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:
            names.append("<relative>")
    return names


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sources()}


def lazy_table(door: Path) -> dict[str, str]:
    """A door's `_LAZY` (name -> module relative to the package), {} for a plain door."""
    for node in tree(door).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets
        ):
            table: dict[str, str] = {}
            assert isinstance(node.value, ast.Dict)
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                if key is None:  # **dict.fromkeys([...], "module")
                    assert isinstance(value, ast.Call)
                    names, module = (ast.literal_eval(a) for a in value.args)
                    table.update(dict.fromkeys(names, module))
                else:
                    table[ast.literal_eval(key)] = ast.literal_eval(value)
            return table
    return {}


def public_names(door: Path) -> set[str]:
    for node in tree(door).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    return set()


def runtime_edges(module: ast.Module, own: str) -> set[str]:
    """The dreamwell modules `module` (named `own`) imports when it runs (inside functions
    too), a name from a lazy door counted as an import of the module that defines it."""
    known = modules()
    skip = type_checking_only(module)
    edges: set[str] = set()
    for node in ast.walk(module):
        if id(node) in skip or not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Import):
            edges.update(a.name for a in node.names if a.name in known)
            continue
        if not node.module or node.module not in known:
            continue
        edges.add(node.module)
        door = known[node.module]
        table = lazy_table(door) if door.name == "__init__.py" else {}
        for alias in node.names:
            if f"{node.module}.{alias.name}" in known:
                edges.add(f"{node.module}.{alias.name}")
            elif alias.name in table:
                edges.add(f"{node.module}.{table[alias.name]}")
    edges.discard(own)
    return edges


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_imports_follow_the_layers_and_are_absolute() -> None:
    wrong = []
    for layer, allowed in ALLOWED.items():
        for path in (ROOT / layer).rglob("*.py"):
            for name in imports(path):
                parts = name.split(".")
                bare = name == "<relative>" or parts[0] in ALLOWED
                upward = parts[0] == "dreamwell" and len(parts) > 1 and parts[1] not in allowed
                if bare or upward:
                    wrong.append(f"{rel(path)}: {name}")
    assert wrong == []


def test_no_module_imports_itself_back_even_from_inside_a_function() -> None:
    """A package's door is imported with its modules by Python itself, so an edge from a
    module to a door it lives under is no circle; every other import that runs counts."""
    graph = {}
    for name, path in modules().items():
        edges = runtime_edges(tree(path), name)
        graph[name] = {e for e in edges if not name.startswith(e + ".")}
    assert circles(graph) == []


def test_the_circle_check_sees_imports_inside_functions_and_through_lazy_doors() -> None:
    """The check above can fail: an import inside a function is an edge, a name from a lazy
    door is an edge to its module, an import under TYPE_CHECKING is none."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from dreamwell.stores.longterm.wal import Wal\n"
        "def f():\n"
        "    from dreamwell.stores.files import write_atomic\n"
        "    from dreamwell.stores import LongTermStore\n"
    )
    edges = runtime_edges(ast.parse(source), "dreamwell.stores.example")
    assert "dreamwell.stores.files" in edges
    assert "dreamwell.stores.longterm.store" in edges
    assert "dreamwell.stores.longterm.wal" not in edges
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_package_has_a_door_and_at_most_twenty_modules_at_its_root() -> None:
    wrong = []
    for layer in LAYERS:
        for folder in [ROOT / layer, *sorted(p for p in (ROOT / layer).rglob("*") if p.is_dir())]:
            if {"__pycache__", "static", "models"} & set(folder.parts):
                continue
            door = folder / "__init__.py"
            own = [p for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
            if not own:
                continue
            if not door.is_file() or not ast.get_docstring(tree(door)):
                wrong.append(
                    f"{rel(folder)}: no door (an __init__.py whose docstring says what it owns)"
                )
            if len(own) > MAX_MODULES_AT_A_ROOT:
                wrong.append(f"{rel(folder)}: {len(own)} modules at its root")
    assert wrong == []


def too_long(module: ast.Module) -> Iterator[str]:
    """Each class over MAX_CLASS_LINES and function over MAX_FUNCTION_LINES in `module`."""
    for node in ast.walk(module):
        limit = (
            MAX_CLASS_LINES
            if isinstance(node, ast.ClassDef)
            else MAX_FUNCTION_LINES
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            else None
        )
        if limit is not None and node.end_lineno is not None:
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                yield f"{node.name}: {lines} lines"


def test_no_class_over_300_lines_and_no_function_over_60() -> None:
    wrong = [f"{rel(path)}: {unit}" for path in sources() for unit in too_long(tree(path))]
    assert wrong == []


def test_the_size_check_sees_a_long_class_and_a_long_method() -> None:
    body = "\n".join(f"        x = {i}" for i in range(61))
    source = f"class Big:\n    def long(self):\n{body}\n" + "    y = 0\n" * 240
    assert list(too_long(ast.parse(source))) == ["Big: 303 lines", "long: 62 lines"]


def test_each_lazy_door_names_modules_that_define_its_public_names() -> None:
    wrong = []
    for door in [*sorted((ROOT / "stores").rglob("__init__.py")), ROOT / "dream/__init__.py"]:
        table = lazy_table(door)
        for name, module in table.items():
            target = door.parent / (module.replace(".", "/") + ".py")
            if not target.is_file():
                wrong.append(f"{rel(door)}: {name} -> {module} (no such module)")
                continue
            defined = {
                n.name
                for n in ast.walk(tree(target))
                if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
            } | {
                t.id
                for n in ast.walk(tree(target))
                if isinstance(n, ast.Assign | ast.AnnAssign)
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                if isinstance(t, ast.Name)
            }
            imported = {
                a.asname or a.name
                for n in ast.walk(tree(target))
                if isinstance(n, ast.ImportFrom)
                for a in n.names
            }
            if name not in defined | imported:
                wrong.append(f"{rel(door)}: {name} is not in {module}")
        missing = set(table) - public_names(door)
        if missing:
            wrong.append(f"{rel(door)}: lazy names not in __all__: {sorted(missing)}")
    assert wrong == []


def test_server_and_dream_use_only_the_stores_public_names() -> None:
    """`dreamwell.stores` and its sub-packages' doors are the layer's interface (their
    `__all__`); server and dream import nothing else of stores (the dream: the top door only)."""
    doors = {module_name(p): public_names(p) for p in (ROOT / "stores").rglob("__init__.py")}
    sub_packages = {name.rsplit(".", 1)[1] for name in doors if name != "dreamwell.stores"}
    wrong = []
    for layer in ("server", "dream"):
        for path in (ROOT / layer).rglob("*.py"):
            for node in ast.walk(tree(path)):
                if isinstance(node, ast.Import):
                    wrong += [
                        f"{rel(path)}: import {a.name}"
                        for a in node.names
                        if a.name.startswith("dreamwell.stores")
                    ]
                if not isinstance(node, ast.ImportFrom) or not node.module:
                    continue
                if not node.module.startswith("dreamwell.stores"):
                    continue
                if node.module == "dreamwell.stores.lazy_exports" and layer == "dream":
                    continue  # how dream/ builds its own door
                if node.module not in doors or (
                    layer == "dream" and node.module != "dreamwell.stores"
                ):
                    wrong.append(f"{rel(path)}: from {node.module} (not a door)")
                    continue
                for alias in node.names:
                    top_door_sub = node.module == "dreamwell.stores" and alias.name in sub_packages
                    if alias.name not in doors[node.module] and not top_door_sub:
                        wrong.append(f"{rel(path)}: {alias.name} from {node.module}")
    assert wrong == []


def test_each_third_party_storage_library_has_one_home() -> None:
    wrong = []
    for path in sources():
        for name in imports(path):
            home = HOMES.get(name.split(".")[0])
            if home is not None and rel(path) not in home:
                wrong.append(f"{rel(path)}: {name}")
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


def sdk_private_attributes() -> set[str]:
    """The private attribute names the installed MCP SDK uses on its own objects."""
    import mcp

    names: set[str] = set()
    for path in Path(mcp.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                names.add(node.attr)
    return {n for n in names if not n.startswith("__")}


def test_the_sdks_private_attributes_are_touched_in_one_module() -> None:
    """Attribute reads like `mcp._lowlevel_server` (on anything but self or cls) whose name
    is one the SDK keeps private happen in server/mcp/sdk.py alone."""
    private = sdk_private_attributes()
    assert {"_lowlevel_server", "_tool_manager", "_prompt_manager"} <= private
    touched: dict[str, set[str]] = {}
    for path in sources():
        for node in ast.walk(tree(path)):
            if not isinstance(node, ast.Attribute) or node.attr not in private:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            touched.setdefault(rel(path), set()).add(node.attr)
    assert set(touched) == {SDK_MODULE}, touched


SERVER = ROOT / "server"
ENTRY_POINT = "server/__main__.py"  # `python -m dreamwell.server`: on top of the stack


def door_value(door: Path, name: str) -> tuple[str, ...] | None:
    """A door's module-level `name = (...)` tuple of strings, None when it has none."""
    for node in tree(door).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    return None


def door_of(path: Path) -> Path:
    """The folder whose door governs `path` (its own package's, a door its own)."""
    folder = path.parent
    while not (folder / "__init__.py").is_file():
        folder = folder.parent
    return folder


def imported_modules(module: ast.Module) -> Iterator[str]:
    """Every dreamwell name `module` imports, TYPE_CHECKING too; `from package import
    module` names the module, as Python imports the package's door with it anyway."""
    known = modules()
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("dreamwell."))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not node.module.startswith("dreamwell."):
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                yield sub if sub in known else node.module


def allowed_by(name: str, entries: Iterable[str]) -> str | None:
    """The entry that lets a module import `name` (itself, or a package above it), if any."""
    return next((e for e in entries if name == e or name.startswith(e + ".")), None)


def undeclared(doors: dict[Path, tuple[str, ...]], files: Iterable[Path]) -> list[str]:
    """Imports from outside a module's own package that its door does not list, and entries
    of a door that no module of its package uses."""
    known = modules()
    wrong: list[str] = []
    used: set[tuple[Path, str]] = set()
    for path in files:
        door = door_of(path)
        for name in imported_modules(tree(path)):
            if name in known and door_of(known[name]) == door:
                continue  # its own package's
            entry = allowed_by(name, doors[door])
            if entry is None:
                wrong.append(f"{rel(path)}: {name} (not in {rel(door)}'s MAY_IMPORT)")
            else:
                used.add((door, entry))
    for door, entries in doors.items():
        wrong += [
            f"{rel(door)}: MAY_IMPORT {e!r} is used by none"
            for e in entries
            if (door, e) not in used
        ]
    return wrong


def server_doors() -> dict[Path, tuple[str, ...]]:
    doors = {}
    for door in sorted(SERVER.rglob("__init__.py")):
        table = door_value(door, "MAY_IMPORT")
        assert table is not None, f"{rel(door)} has no MAY_IMPORT"
        doors[door.parent] = table
    return doors


def test_each_server_door_lists_what_its_package_imports_and_nothing_else() -> None:
    files = [p for p in sorted(SERVER.rglob("*.py")) if rel(p) != ENTRY_POINT]
    assert undeclared(server_doors(), files) == []


def package_of(name: str) -> str:
    """Which of server's packages a module of server is in: a sub-package below server's
    root, `root` for the modules at the root, `__main__` for the entry point."""
    parts = name.split(".")[2:]
    if parts == ["__main__"]:
        return "__main__"
    if len(parts) > 1 or (parts and (SERVER / parts[0]).is_dir()):
        return parts[0]
    return "root"


def package_edges() -> dict[tuple[str, str], list[str]]:
    """(importer, imported) between server's packages -> the imports, run-time ones only."""
    edges: dict[tuple[str, str], list[str]] = {}
    for name, path in modules().items():
        if not name.startswith("dreamwell.server"):
            continue
        for target in runtime_edges(tree(path), name):
            here, there = package_of(name), package_of(target)
            if target.startswith("dreamwell.server") and here != there:
                edges.setdefault((here, there), []).append(f"{rel(path)} -> {target}")
    return edges


def upward(edges: dict[tuple[str, str], list[str]], stack: tuple[str, ...]) -> list[str]:
    order = ("root", *stack, "__main__")
    return [i for (a, b), found in edges.items() if order.index(a) <= order.index(b) for i in found]


def test_servers_packages_are_a_stack_no_import_up_and_no_ring() -> None:
    """server's door names the order (STACK, bottom to top, above the root modules); every
    import between two of its packages, even one inside a function, points down it."""
    stack = door_value(SERVER / "__init__.py", "STACK")
    assert stack is not None
    packages = {p.name for p in SERVER.iterdir() if (p / "__init__.py").is_file()}
    assert sorted(stack) == sorted(packages)
    edges = package_edges()
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    assert (upward(edges, stack), circles(graph)) == ([], [])


def test_the_stack_checks_can_fail() -> None:
    """An import its door does not list, an entry nobody uses, and an import up are seen."""
    hooks = SERVER / "hooks"
    doors = {hooks: ("dreamwell.stores", "dreamwell.server.nothing")}
    wrong = undeclared(doors, [hooks / "events.py"])
    assert (
        "server/hooks/events.py: dreamwell.server.recall_text (not in server/hooks's MAY_IMPORT)"
        in wrong
    )
    assert "server/hooks: MAY_IMPORT 'dreamwell.server.nothing' is used by none" in wrong
    edges = {("hooks", "cli"): ["x"], ("cli", "root"): ["y"], ("root", "hooks"): ["z"]}
    assert upward(edges, ("hooks", "cli")) == ["x", "z"]
    assert package_of("dreamwell.server.hooks.agents.core") == "hooks"
    assert package_of("dreamwell.server.config") == "root"


LOOPS_MODULE = "server/loops.py"


def loops_started(module: ast.Module) -> list[str]:
    """The process-wide loops (`*_forever`, `*_when_idle`) a module hands to a task group."""
    found = []
    for node in ast.walk(module):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr == "start_soon" and node.args:
            name = ast.unparse(node.args[0]).rsplit(".", 1)[-1]
            if name.endswith(("_forever", "_when_idle")):
                found.append(name)
    return found


def test_every_process_wide_loop_is_started_from_server_loops() -> None:
    """`serve` and `dreamwell ui` call loops.start; nothing else starts a loop of its own."""
    started = {rel(p): loops_started(tree(p)) for p in sorted(SERVER.rglob("*.py"))}
    assert {path: names for path, names in started.items() if names and path != LOOPS_MODULE} == {}
    source = "async def f(tg):\n    tg.start_soon(app.backfill_forever, runtime)\n"
    assert loops_started(ast.parse(source)) == ["backfill_forever"]
