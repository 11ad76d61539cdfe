"""How clients reach the server: stdio with an answer to every frame (stdio.py, read and
written from the event loop by wire.py), SSE and streamable HTTP behind optional bearer tokens
(http.py, uvicorn_server.py), and `serve` (serve.py), which runs one of them with the
process's background work.

Public: serve.serve, http.build_asgi, uvicorn_server.uvicorn_server. May import: server.mcp,
server.ui (the browser beside streamable HTTP), server's root."""
