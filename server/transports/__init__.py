"""How clients reach the server: stdio with an answer to every frame (stdio.py, read and
written from the event loop by wire.py; early.py and early_lists.py answer before the SDK has
loaded), SSE and streamable HTTP behind optional bearer tokens (http.py, bearer.py,
uvicorn_server.py), and `serve` (serve.py), which runs one of them with the process's
background loops (server/loops.py).

Public: serve.serve, http.build_asgi, uvicorn_server.uvicorn_server."""

# What this package's modules may import besides each other (a module or a package and
# everything under it), checked by tests/test_layers.py: nothing else, and every entry used.
MAY_IMPORT = (
    "dreamwell.server.config",
    "dreamwell.server.heap",
    "dreamwell.server.hooks.old_hooks",
    "dreamwell.server.loops",
    "dreamwell.server.mcp",
    "dreamwell.server.runtime",
    "dreamwell.server.ui.app",
    "dreamwell.stores",
)
