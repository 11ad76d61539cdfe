"""The agents' hooks (SPEC §8, §13: Claude Code, Codex, Gemini CLI, Copilot CLI), which must never
break the user's prompt; what differs between agents is a small table each in agents/ (a hook
command's `AGENT:EVENT`). On POSIX install writes client.py as the hook command (standard
library only, under `python -I -S`): it hands each hook to resident.py, a process per
configuration that keeps the modules imported, or runs `dreamwell hook EVENT` itself when none
answers (and starts one). entry.py parses that command, events.py runs each event (in the
hook's process or the resident's), settings.py reads the few settings a hook needs without
pydantic, skills.py picks the skills shown, transcript.py reads what is new in a transcript,
refresh.py rebuilds the hooks' snapshot in the background, hybrid.py holds the resident's
long-term store and embedder so that the hooks rank as search_memory does (stores.hooks'
`recalled`, the function every injecting path calls), and stats.py says what the hooks did
lately.

Public: entry.hook_main, events.EVENTS, hook_command and hook_output, stats.hook_lines and
hook_activity; client.py and resident.py are run as scripts.
May import: server.recall_text, server.flags, server.cli.parsing (entry.py only, for the
arguments its own reading leaves to argparse), server.hooks.old_hooks (resident.py only: an
earlier version's door file), server.config, server.runtime and server.heap (hybrid.py only:
the store opened as a server opens it), dreamwell.stores."""
