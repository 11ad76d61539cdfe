"""The agents' hooks (docs/claude-code.md, docs/codex.md, docs/gemini.md, docs/copilot.md),
which must never break the user's prompt; what differs between agents is a small table each
in agents/ (a hook command's `AGENT:EVENT`), so adding an agent is one module there. On
POSIX install writes client.py as the hook command (standard library only, under `python -I
-S`; its path is in users' settings files: it never moves): it hands each hook to
resident.py, a process per configuration that keeps the modules imported, or runs
`dreamwell hook EVENT` (server/cli/hook.py) itself when none answers (and starts one).
events.py runs each event (in the hook's process or the resident's), settings.py reads the
few settings and the arguments a hook needs without pydantic or argparse, skills.py picks
the skills shown, transcript.py reads what is new in a transcript, refresh.py rebuilds the
hooks' snapshot in the background, hybrid.py holds the resident's long-term store and
embedder so that the hooks rank as search_memory does (stores.hooks' `recalled`, the
function every injecting path calls), stats.py says what the hooks did lately, and
old_hooks.py finds and removes the `http` hooks and door file earlier versions left.

Public: events.EVENTS, hook_command and hook_output, settings.plain_arguments, stats.hook_lines
and hook_activity; client.py and resident.py are run as scripts. The hook process stays
light: of server's root it imports only the modules listed below."""

# What this package's modules may import besides each other (a module or a package and
# everything under it), checked by tests/test_layers.py: nothing else, and every entry used.
MAY_IMPORT = (
    "dreamwell.server.auto_dream",
    "dreamwell.server.config",
    "dreamwell.server.detached",
    "dreamwell.server.flags",
    "dreamwell.server.heap",
    "dreamwell.server.hooks.agents",
    "dreamwell.server.recall_text",
    "dreamwell.server.runtime",
    "dreamwell.server.settings_file",
    "dreamwell.server.where",
    "dreamwell.server.wording",
    "dreamwell.stores",
)
