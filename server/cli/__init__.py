"""The `dreamwell` command line: parsing (parsing.py: help, flags derived from the settings,
Settings built from them) and one small function per command (main.py), with the commands
that have modules of their own: export and import (porting.py, formats.py), stats and doctor
(stats.py), skills (skills.py) and install (install.py: the files it edits through
config_files.py; Codex, Gemini CLI and Copilot CLI in agents/).

Public: main.run (the console script), parsing.parser. May import every other server package;
nothing in server imports main.py but `python -m dreamwell.server`."""
