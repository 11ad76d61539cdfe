"""The MCP edge: `build_server` (app.py) with the eight tools (tools.py, their text in
render.py), their arguments checked before any handler runs (arguments.py), the `recall`
prompt (recall.py; its wording, shared with the hooks, is server/recall_text.py), the `dream`
prompt and report resources (dream.py, reports.py, sampling.py; the cycle itself is
server/dreaming.py), skills as prompts, resources and the Skills Extension (skills.py,
skills_recall.py, skills_watch.py), the caller's roots (projects.py), the records of reads
(recording.py), and the one module that touches the MCP SDK's private attributes (sdk.py).
Process-wide loops are not here: server/loops.py.

Public: app.build_server; handshake (who the server is, for the early stdio replies)."""

# What this package's modules may import besides each other (a module or a package and
# everything under it), checked by tests/test_layers.py: nothing else, and every entry used.
MAY_IMPORT = (
    "dreamwell.dream",
    "dreamwell.server.config",
    "dreamwell.server.dream_llm",
    "dreamwell.server.dreaming",
    "dreamwell.server.recall_text",
    "dreamwell.server.runtime",
    "dreamwell.server.wording",
    "dreamwell.stores",
)
