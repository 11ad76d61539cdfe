"""The MCP edge: `build_server` (app.py) with the eight tools (tools.py), their arguments
checked before any handler runs (arguments.py), the `recall` prompt (recall.py, recall_text.py,
render.py), the `dream` prompt and report resources (dream.py, sampling.py), skills as prompts,
resources and the Skills Extension (skills.py, skills_recall.py, skills_watch.py), and the one
module that touches the MCP SDK's private attributes (sdk.py).

Public: app.build_server and the background loops the transports run; recall_text (also used
by the hooks). May import: server's root (config, runtime), dreamwell.stores and
dreamwell.dream through their doors, the MCP SDK."""
