"""The `dreamwell` command line, the top of server/'s stack: parsing (parsing.py: help, flags
derived from the settings, Settings built from them), one small function per command
(main.py), and each command's body that is more than a few lines: `dream` (dream.py), `hook`
(hook.py), `ui` (ui.py), export and import (porting.py, formats.py), stats and doctor
(stats.py, doctor.py, checks.py), skills (skills.py), config (config_command.py) and install
(install.py: the files it edits through config_files.py; Codex, Gemini CLI and Copilot CLI in
agents/).

Public: main.run (the console script), parsing.parser. Nothing in server imports cli/ but
`python -m dreamwell.server`."""

# What this package's modules may import besides each other (a module or a package and
# everything under it), checked by tests/test_layers.py: nothing else, and every entry used.
MAY_IMPORT = (
    "dreamwell.dream",
    "dreamwell.server.cli.agents",
    "dreamwell.server.config",
    "dreamwell.server.dream_llm",
    "dreamwell.server.dreaming",
    "dreamwell.server.flags",
    "dreamwell.server.heap",
    "dreamwell.server.hooks",
    "dreamwell.server.loops",
    "dreamwell.server.runtime",
    "dreamwell.server.settings_file",
    "dreamwell.server.transports",
    "dreamwell.server.ui",
    "dreamwell.server.where",
    "dreamwell.stores",
)
