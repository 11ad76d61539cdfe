"""`dreamwell install codex|gemini|copilot`: what each agent needs written into its own files
to run dreamwell — the MCP server, the hooks (each a command naming the agent:
server/hooks/agents/) and whatever that agent needs to actually run them (Codex's trust
hashes and tool approval, Gemini's `trust` and millisecond timeouts, Copilot's hook file).
One module per agent, each a `plan(Setup) -> changes` over server/cli/config_files.py's
machinery (merged, backed up, idempotent, reversible, `--dry-run`); toml_tables.py edits
only our own tables of a TOML file.

Public: table.PLANS (name -> plan), table.NAMES, setup.Setup."""

# What this package's modules may import besides each other (a module or a package and
# everything under it), checked by tests/test_layers.py: nothing else, and every entry used.
MAY_IMPORT = (
    "dreamwell.server.cli.config_files",
    "dreamwell.server.hooks.agents",
)
