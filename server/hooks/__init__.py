"""Claude Code's hooks (SPEC §8): `dreamwell hook EVENT`, a fresh process per event that
must never break the user's prompt. entry.py parses the command, events.py runs each event,
settings.py reads the few settings a hook needs without pydantic, skills.py picks the skills
shown, transcript.py reads what is new in a transcript, refresh.py rebuilds the hooks'
snapshot in the background, and stats.py says what the hooks did lately.

Public: entry.hook_main, events.EVENTS and hook_command, stats.hook_lines and hook_activity.
May import: server.mcp.recall_text, server.flags, server.cli.parsing (entry.py only, for the
arguments its own reading leaves to argparse), dreamwell.stores."""
