"""Per-process state behind the tools: stores per tenant, opened lazily off the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from dreamwell.server.config import Settings
from dreamwell.server.projects import CallerProjects
from dreamwell.stores import DataDir, StoreError, StoreUnavailable, new_id

if TYPE_CHECKING:  # the store modules load when a tenant opens, after the handshake
    from dreamwell.stores import (
        CrossEncoderReranker,
        Embedder,
        JsonlLog,
        LongTermStore,
        WorkingMemory,
    )

logger = logging.getLogger(__name__)

NAMESPACE_HEADER = "dreamwell-namespace"
TENANT_SCOPE_KEY = "dreamwell.tenant"
# who authenticated: a digest of the bearer token, never the token (server/transports/http.py)
PRINCIPAL_SCOPE_KEY = "dreamwell.principal"
_ACTIVITY_EVERY = 5.0
# The transport request of the MCP request being handled (set by the server's middleware), for
# handlers the SDK gives no Context, such as static resources.
CURRENT_REQUEST: ContextVar[Any] = ContextVar("dreamwell_request", default=None)
# Cosine below this is ignored in hybrid ranking (docs/recall.md), and the share of BM25 in it, per
# embedder; tuned on the LoCoMo dev split (tests/bench/tune_hybrid.py), the seed's 0.5 for
# nomic. e5: BM25 0.4 / cosine 0.6 gave R@5 .637 (0.3: .625, 0.5: .636, 0.6: .626); its
# cosines sit high, so any floor up to 0.75 changes nothing and 0.8 costs 0.4-1.8 points.
MIN_SIMILARITY = {"e5": 0.7, "minilm": 0.2, "ollama": 0.5}
KEYWORD_WEIGHT = {"e5": 0.4, "minilm": 0.6, "ollama": 0.6}
# A save waits while more of the server's own memories than this wait for their vector (and
# its backfill is logging them): one backfill batch. A burst then runs at the embedder's pace
# and a search after it finds nearly every vector (see `Vectors.hold_save`). LoCoMo with the
# questions right after the saves: R@5 0.685 and 0.682 at 64, 0.671 and 0.672 at 128, 0.596
# without the wait; 0.684 and 0.687 before (when the first search embedded up to 512 itself).
SAVE_BACKLOG = 64


class Nudge:
    """Wakes the task waiting in `wait` from any thread, so that a background loop sleeps until
    it has work instead of polling (an idle server that woke 50 times a second kept a laptop's
    CPU out of its sleep states). Calls before the first `wait` are dropped: the loop looks at
    everything before it first waits."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None

    def __call__(self) -> None:
        loop, event = self._loop, self._event
        if loop is None or event is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting
            loop.call_soon_threadsafe(event.set)

    def _bound(self) -> asyncio.Event:
        """The event of the running loop (made on first use, and again for a new loop)."""
        loop = asyncio.get_running_loop()
        if self._event is None or self._loop is not loop:
            self._loop, self._event = loop, asyncio.Event()
        return self._event

    def clear(self) -> None:
        """Forget earlier nudges (call in the loop, then look for work, then `wait`)."""
        self._bound().clear()

    async def wait(self, timeout: float) -> None:
        """Until nudged since the last `clear`, or `timeout` seconds."""
        event = self._bound()
        with anyio.move_on_after(timeout):
            await event.wait()


class Tenant:
    """The stores of one tenant. Working memory and the recall log open at once; long-term
    memory opens on first use and, if it cannot (a read-only or damaged data directory), says
    so on every use and tries again next time, while working memory keeps serving."""

    def __init__(
        self,
        data_dir: Path,
        working: WorkingMemory,
        recall_log: JsonlLog,
        open_longterm: Callable[[], LongTermStore],
        on_open: Callable[[], None] | None = None,
    ) -> None:
        """`on_open` is called once long-term memory has opened (and is what `longterm` and
        `opened_longterm` give)."""
        self.data_dir = data_dir
        self.working = working
        self.recall_log = recall_log
        self._open_longterm = open_longterm
        self._longterm: LongTermStore | None = None
        self._on_open = on_open
        self._lock = threading.Lock()

    @property
    def opened_longterm(self) -> LongTermStore | None:
        """Long-term memory if it is open; never opens it (an event loop may ask)."""
        return self._longterm

    @property
    def longterm(self) -> LongTermStore:
        found = self._longterm
        if found is not None:
            return found
        with self._lock:
            if self._longterm is None:
                try:
                    self._longterm = self._open_longterm()
                except (OSError, ValueError) as exc:  # Tantivy reports I/O faults as ValueError
                    logger.error("long-term memory in %s cannot be opened: %s", self.data_dir, exc)
                    raise StoreUnavailable(
                        f"long-term memory in {self.data_dir} cannot be opened ({exc}); check "
                        "that the data directory is writable and has free space. Working memory "
                        "still works."
                    ) from exc
                if self._on_open is not None:
                    self._on_open()
            return self._longterm


class Runtime:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.process_namespace = settings.namespace or f"session/{new_id()}"
        self.projects = CallerProjects(settings)  # each caller's project (docs/projects.md)
        self._tenants: dict[str, Tenant] = {}
        self._opening: anyio.Lock | None = None
        self._last_touch = 0.0
        self.served = 0  # requests answered (`trim_when_idle` hands the heap back after them)
        self.serving = 0  # requests being answered now
        self.last_served = 0.0  # monotonic time the last one was answered
        # wakes the background backfill: a store opened (its vectors to load) or one with
        # memories to embed
        self.vectors_wanted = Nudge()
        self.embedder = self._embedder()
        # Deep search (opt-in): loads its model on first use.
        self.reranker: CrossEncoderReranker | None = None
        if settings.rerank:
            from dreamwell.stores import CrossEncoderReranker

            self.reranker = CrossEncoderReranker()
        # save_memory queues new memories for enrichment when an LLM is configured
        ollama = settings.llm_provider == "ollama"
        self.enriching = (
            settings.enrich
            and settings.llm_provider != "claude-code"
            and bool(settings.llm_base_url or (settings.ollama_host if ollama else None))
        )

    def _embedder(self) -> Embedder | None:
        from dreamwell.stores import OllamaEmbedder, OnnxE5, OnnxMiniLM  # no model loads here

        s = self.settings
        if s.embedder == "e5":
            return OnnxE5()
        if s.embedder == "minilm":
            return OnnxMiniLM()
        if s.embedder == "ollama":
            return OllamaEmbedder(
                s.ollama_host or "http://127.0.0.1:11434", s.ollama_embed_model, s.ollama_timeout
            )
        return None

    def tenant_dir(self, tenant: str) -> Path:
        """The tenant's directory (`""`: the data directory itself); names are checked."""
        return DataDir(self.settings.data_dir).tenant(tenant).root

    def open_tenant(self, tenant: str) -> Tenant:
        """Open (blocking) the stores of a tenant; `tenant()` is the async, cached way."""
        from dreamwell.stores import RECALL, JsonlLog, WorkingMemory

        started = time.perf_counter()
        data_dir = self.tenant_dir(tenant)
        opened = Tenant(
            data_dir,
            WorkingMemory(
                data_dir,
                default_ttl_minutes=self.settings.wm_ttl_minutes,
                max_per_namespace=self.settings.wm_max_per_namespace,
            ),
            JsonlLog(data_dir, RECALL),
            lambda: self._longterm(data_dir),
            on_open=self.vectors_wanted,
        )
        try:
            opened.longterm  # noqa: B018 - open it now, off the first call's clock
        except StoreError as exc:  # each long-term call will say so; working memory serves
            logger.error("%s", exc)
        logger.info(
            "opened stores in %s (%.0f ms)", data_dir, 1000 * (time.perf_counter() - started)
        )
        return opened

    def _longterm(self, data_dir: Path) -> LongTermStore:
        from dreamwell.stores import LongTermStore

        s = self.settings
        return LongTermStore(
            data_dir,
            embedder=self.embedder,
            keyword_weight=(
                s.keyword_weight
                if s.keyword_weight is not None
                else KEYWORD_WEIGHT.get(s.embedder, 1.0)
            ),
            min_similarity=(
                s.min_similarity
                if s.min_similarity is not None
                else MIN_SIMILARITY.get(s.embedder, 0.0)
            ),
            reranker=self.reranker,
            rerank_depth=s.rerank_depth,
            contextual=s.contextual,
            wait_for_model=False,  # the runtime warms the model after the handshake
            on_vectors_wanted=self.vectors_wanted,
            save_backlog=SAVE_BACKLOG,  # its backfill_forever logs the vectors
        )

    async def tenant(self, name: str = "") -> Tenant:
        found = self._tenants.get(name)
        if found is not None:
            return found
        if self._opening is None:
            self._opening = anyio.Lock()
        async with self._opening:
            if name not in self._tenants:
                self._tenants[name] = await anyio.to_thread.run_sync(
                    self.open_tenant, name, abandon_on_cancel=True
                )
                self.vectors_wanted()  # its store opened before `opened()` listed it
        return self._tenants[name]

    def opened(self) -> list[Tenant]:
        return list(self._tenants.values())

    @contextmanager
    def serving_one(self) -> Iterator[None]:
        """Around each request: what `trim_when_idle` waits on (event loop only)."""
        self.serving += 1
        try:
            yield
        finally:
            self.serving -= 1
            self.served += 1
            self.last_served = time.monotonic()

    def touch(self, tenant: Tenant) -> None:
        """Record tool traffic in the data directory (the dream worker yields to it)."""
        now = time.monotonic()
        if now - self._last_touch < _ACTIVITY_EVERY:
            return
        self._last_touch = now
        marker = tenant.data_dir / ".activity"
        try:
            marker.touch()
        except OSError as exc:  # pragma: no cover - a read-only data dir still serves reads
            logger.warning("cannot mark activity at %s: %s", marker, exc)

    def caller(self, request: Any) -> tuple[str, str]:
        """(tenant, namespace) of the caller of this request
        (docs/reference.md#working-memory-namespaces).

        `request` is the transport's HTTP request, or None on stdio and in-memory sessions."""
        if request is None:
            return "", self.process_namespace
        scope = getattr(request, "scope", {})
        tenant = str(scope.get(TENANT_SCOPE_KEY, ""))
        if self.settings.namespace:
            return tenant, self.settings.namespace
        headers = request.headers
        pinned = headers.get(NAMESPACE_HEADER)
        if pinned:
            from dreamwell.stores import check_own_namespace

            return tenant, check_own_namespace(pinned.strip())
        session = headers.get("mcp-session-id") or request.query_params.get("session_id")
        if session:
            digest = hashlib.sha256(f"{tenant}\0{session}".encode()).hexdigest()[:12]
            return tenant, f"session/{digest}"
        principal = scope.get(PRINCIPAL_SCOPE_KEY)
        if principal:  # no session (stateless): the authenticated principal, on every replica
            digest = hashlib.sha256(f"{tenant}\0principal\0{principal}".encode()).hexdigest()
            return tenant, f"session/{digest[:12]}"
        return tenant, self.process_namespace
