"""The SDK's own stdio wire, for stdio_wire_bench.py (not product code).

With this folder on PYTHONPATH, a `dreamwell serve` process reads and writes its stdio pipes
as the MCP SDK does (a worker thread per line read and per write and flush), not from the
event loop (server/transports/wire.py): the bench's "before".
"""

import sys

if "serve" in sys.argv:
    from dreamwell.server.transports import wire

    wire._own_pipe = lambda buffer: None  # every wire served as a file is
