"""The MCP edge of dreamwell: tools, transports, hooks and the command line, as a stack.

Its packages, bottom to top (STACK): the modules at this root (the settings, the runtime
with its stores, the background loops and the dream worker every caller shares, the wording
the hooks and the MCP prompts share), then hooks/, mcp/, ui/, transports/ and cli/. A
package imports only what lies below it; `python -m dreamwell.server` (__main__.py) sits on
top and runs cli/main.py. The modules at this root import only dream and stores."""

STACK = ("hooks", "mcp", "ui", "transports", "cli")  # bottom to top, above the root modules

# What this package's modules may import besides each other (a module or a package and
# everything under it), checked by tests/test_layers.py: nothing else, and every entry used.
MAY_IMPORT = (  # the root modules'
    "dreamwell.dream",
    "dreamwell.stores",
)
