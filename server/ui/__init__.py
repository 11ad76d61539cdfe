"""The memory browser: a page for people on 127.0.0.1 (app.py with static/), and the JSON
API behind it over one tenant's memories (memories.py) and skills (skills.py); `dreamwell ui`
answers only whoever holds the token it prints (secret.py).

Public: app.ui_command, app.with_ui. May import: server.mcp, server.cli.stats,
server.hooks.stats, server.transports.uvicorn_server, dreamwell.stores, dreamwell.dream."""
