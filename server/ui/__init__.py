"""The memory browser: a page for people on 127.0.0.1 (app.py with static/), and the JSON
API behind it over one tenant's memories (memories.py) and skills (skills.py), answering only
whoever holds the token (secret.py). `dreamwell ui` (server/cli/ui.py) serves it alone;
streamable HTTP (server/transports/http.py) serves it beside MCP.

Public: app.with_ui, secret.RequireSecret."""

# What this package's modules may import besides each other (a module or a package and
# everything under it), checked by tests/test_layers.py: nothing else, and every entry used.
MAY_IMPORT = (
    "dreamwell.dream",
    "dreamwell.server.config",
    "dreamwell.server.dream_llm",
    "dreamwell.server.hooks.stats",
    "dreamwell.server.runtime",
    "dreamwell.stores",
)
