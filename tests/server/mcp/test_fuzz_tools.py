"""Stateful fuzzing of the eight tools through the in-memory client.

Random sequences of valid and invalid calls run against a simple model of what the store
should hold: after every step the store agrees with the model, and no reply ever shows a
traceback or validator internals. Bigger runs: DREAMWELL_FUZZ_STEPS=100000 pytest this file."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from mcp import Client

from dreamwell.server.config import Settings
from dreamwell.server.mcp.app import build_server
from dreamwell.server.runtime import Runtime
from dreamwell.stores import fold_text

NS = "patrol/fuzz"
STEPS = int(os.environ.get("DREAMWELL_FUZZ_STEPS", "2000"))
STEPS_PER_EXAMPLE = 100
INTERNAL = re.compile(
    r"Traceback|Error executing tool|Internal server error|constrained-str|Input should|"
    r"String should|Field required|pydantic|\[type="
)
WORDS = ["deploy", "tuesday", "Chicago", "coffee", "naïve", "東京", "rust", "alpha", "pin"]
CATEGORIES = [None, "ops", "ops/deploy", "User-Prefs"]
KEYS = ["draft", "notes", "a/b", "x.y:z", "k-1"]

content_text = st.builds(
    lambda words, sep, upper: sep.join(w.upper() if upper else w for w in words),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    st.sampled_from([" ", "  ", ", ", "! ", " - "]),
    st.booleans(),
)
tags_arg = st.one_of(
    st.none(),
    st.sampled_from(["a, b", "Tag", ""]),
    st.lists(st.sampled_from(["a", "b", "c"]), max_size=3),
)
bad_save_memory = st.sampled_from(
    [
        {"content": ""},
        {"content": "\x00\x01"},
        {"content": "x" * 32_001},
        {"content": "ok", "category": "../etc"},
        {"content": "ok", "category": "/abs"},
        {"content": "ok", "tags": ["t" * 65]},
        {"content": "ok", "tags": 5},
        {"content": "ok", "importance": 1},
        {"content": 7},
        {},
    ]
)
bad_working = st.sampled_from(
    [
        {"key": "k", "data": "v", "ttl_minutes": True},
        {"key": "k", "data": "v", "ttl_minutes": "5"},
        {"key": "k", "data": "v", "ttl_minutes": 0},
        {"key": "k", "data": "v", "ttl_minutes": 10_081},
        {"key": "../k", "data": "v"},
        {"key": "a//b", "data": "v"},
        {"key": "session/other/k", "data": "v"},
        {"key": "k", "data": "v", "colour": "red"},
        {"key": "k"},
        {"key": "k", "data": "v", "category": "no spaces"},
    ]
)


json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
TOOLS = [
    "save_memory",
    "search_memory",
    "delete_memory",
    "list_memory_categories",
    "save_to_working_memory",
    "get_from_working_memory",
    "list_working_memory",
    "search_working_memory",
]
READS = {
    "search_memory": ["query", "category", "tags"],
    "get_from_working_memory": ["key"],
    "list_working_memory": ["namespace"],
    "search_working_memory": ["query", "category", "tags", "namespace"],
}


class Counter:
    steps = 0


class ToolsMachine(RuleBasedStateMachine):
    portal: BlockingPortal
    root: Path
    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.memories: dict[str, tuple[str, str | None]] = {}  # id -> (content, category)
        self.working: dict[str, str] = {}  # full key -> value
        data = Path(tempfile.mkdtemp(dir=self.root))
        config = Settings(data_dir=data, embedder="none", namespace=NS)
        self.runtime = Runtime(config)
        server = build_server(config, self.runtime)
        self._cm: AbstractContextManager[Client] = self.portal.wrap_async_context_manager(
            Client(server)
        )
        self.client = self._cm.__enter__()

    def teardown(self) -> None:
        self._cm.__exit__(None, None, None)

    def call(self, tool: str, args: dict[str, Any]) -> tuple[bool, str]:
        Counter.steps += 1
        result = self.portal.call(self.client.call_tool, tool, args)
        texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
        assert len(texts) == 1, result
        assert not INTERNAL.search(texts[0]), (tool, args, texts[0])
        return bool(result.is_error), texts[0]

    # ---- long-term memory -------------------------------------------------------------------
    @initialize()
    def start(self) -> None:
        assert self.call("list_memory_categories", {})[1].startswith("No categories")

    def _existing(self, content: str, category: str | None) -> str | None:
        key = fold_text(content.strip())
        return next(
            (i for i, (c, cat) in self.memories.items() if fold_text(c) == key and cat == category),
            None,
        )

    @rule(target=ids, content=content_text, category=st.sampled_from(CATEGORIES), tags=tags_arg)
    def save_memory(self, content: str, category: str | None, tags: Any) -> str:
        args: dict[str, Any] = {"content": content}
        if category is not None:
            args["category"] = category
        if tags is not None:
            args["tags"] = tags
        existing = self._existing(content, category)
        error, text = self.call("save_memory", args)
        assert not error, text
        match = re.fullmatch(r"(Saved|Reinforced) memory \[([0-9a-f]{12})\] .*", text)
        assert match, text
        if existing is not None:
            assert match.group(1) == "Reinforced" and match.group(2) == existing, text
        else:
            assert match.group(1) == "Saved", text
            self.memories[match.group(2)] = (content.strip(), category)
        return match.group(2)

    @rule(args=bad_save_memory)
    def save_memory_refused(self, args: dict[str, Any]) -> None:
        error, text = self.call("save_memory", args)
        assert error, text

    @rule(memory_id=consumes(ids))
    def delete_memory(self, memory_id: str) -> None:
        error, text = self.call("delete_memory", {"id": memory_id})
        if memory_id in self.memories:
            assert not error and text.startswith(f"Deleted memory entry '{memory_id}'"), text
            del self.memories[memory_id]
        else:  # already gone (a reinforcement returned the same id twice)
            assert error and "No memory entry found" in text, text

    @rule(memory_id=st.text("0123456789abcdef", min_size=12, max_size=12))
    def delete_unknown_memory(self, memory_id: str) -> None:
        error, text = self.call("delete_memory", {"id": memory_id})
        if memory_id in self.memories:
            del self.memories[memory_id]
        else:
            assert error and "No memory entry found" in text, text

    @rule()
    def list_categories(self) -> None:
        counts: dict[str, int] = {}
        for _content, category in self.memories.values():  # none: counted as uncategorized
            counts[category or "uncategorized"] = counts.get(category or "uncategorized", 0) + 1
        error, text = self.call("list_memory_categories", {})
        assert not error
        listed = dict(re.findall(r"^- (.+) \((\d+)\)$", text, re.M))
        assert {c: int(n) for c, n in listed.items()} == counts, text

    @rule(query=st.one_of(st.none(), st.sampled_from(WORDS)))
    def search_memory(self, query: str | None) -> None:
        error, text = self.call("search_memory", {} if query is None else {"query": query})
        assert not error, text
        shown = re.findall(r"^- \[([0-9a-f]{12})\]", text, re.M)
        assert set(shown) <= set(self.memories), text
        if query is None:
            assert len(shown) == min(20, len(self.memories)), text

    @invariant()
    def store_agrees_with_the_model(self) -> None:
        """Read the stores directly (cheaper than a tool call, and it sees everything)."""
        tenant = self.portal.call(self.runtime.tenant, "")
        live = {e.id: (e.content, e.category) for e in tenant.longterm.entries()}
        assert live == self.memories
        held = {e.key: e.value for e in tenant.working.listing(NS)}
        assert held == self.working

    # ---- anything at all ---------------------------------------------------------------------
    @rule(tool=st.sampled_from(TOOLS), args=st.dictionaries(st.text(max_size=8), json_value))
    def junk_with_an_unknown_argument(self, tool: str, args: dict[str, Any]) -> None:
        error, text = self.call(tool, args | {"zz_unknown": 1})
        assert error and "unknown argument" in text, text

    @rule(data=st.data(), tool=st.sampled_from(sorted(READS)))
    def random_values_for_a_read(self, data: st.DataObject, tool: str) -> None:
        names = data.draw(st.lists(st.sampled_from(READS[tool]), unique=True))
        self.call(tool, {name: data.draw(json_value) for name in names})

    @rule(message=st.text(max_size=200))
    def recall(self, message: str) -> None:
        Counter.steps += 1
        result = self.portal.call(self.client.get_prompt, "recall", {"message": message})
        text = result.messages[0].content.text  # type: ignore[union-attr]
        assert not INTERNAL.search(text), text
        assert set(re.findall(r"^- \[([0-9a-f]{12})\]", text, re.M)) <= set(self.memories)

    # ---- working memory ---------------------------------------------------------------------
    @rule(key=st.sampled_from(KEYS), data=st.text(max_size=40), ttl=st.integers(60, 10_080))
    def save_working(self, key: str, data: str, ttl: int) -> None:
        error, text = self.call(
            "save_to_working_memory", {"key": key, "data": data, "ttl_minutes": ttl}
        )
        assert not error and f"'{NS}/{key}'" in text, text
        self.working[f"{NS}/{key}"] = data

    @rule(args=bad_working)
    def save_working_refused(self, args: dict[str, Any]) -> None:
        error, text = self.call("save_to_working_memory", args)
        assert error, text

    @rule(key=st.sampled_from([*KEYS, "missing", "session/x/y"]))
    def get_working(self, key: str) -> None:
        full = key if key.count("/") >= 2 else f"{NS}/{key}"
        error, text = self.call("get_from_working_memory", {"key": key})
        if full in self.working:
            assert not error and text == self.working[full], text
        else:
            assert error and "not found or has expired" in text, text

    @rule(namespace=st.sampled_from([None, NS, "patrol", "session", "../x"]))
    def list_working(self, namespace: str | None) -> None:
        error, text = self.call(
            "list_working_memory", {} if namespace is None else {"namespace": namespace}
        )
        if namespace == "../x":
            assert error, text
            return
        assert not error, text
        listed = set(re.findall(r"^- (\S+) \(expires in", text, re.M))
        expected = set() if namespace == "session" else set(self.working)
        assert listed == expected, text

    @rule(query=st.one_of(st.none(), st.sampled_from(WORDS)), tags=tags_arg)
    def search_working(self, query: str | None, tags: Any) -> None:
        args: dict[str, Any] = {} if query is None else {"query": query}
        if tags is not None:
            args["tags"] = tags
        error, text = self.call("search_working_memory", args)
        assert not error, text
        assert set(re.findall(r"^- (\S+) \(expires in", text, re.M)) <= set(self.working), text


@pytest.fixture
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal("asyncio") as p:
        yield p


def test_random_tool_calls_agree_with_a_model_of_the_store(
    tmp_path: Path, portal: BlockingPortal
) -> None:
    ToolsMachine.portal = portal
    ToolsMachine.root = tmp_path
    Counter.steps = 0
    while Counter.steps < STEPS:
        run_state_machine_as_test(
            ToolsMachine,
            settings=settings(
                max_examples=max(1, (STEPS - Counter.steps) // (2 * STEPS_PER_EXAMPLE)),
                stateful_step_count=STEPS_PER_EXAMPLE,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    assert Counter.steps >= STEPS
