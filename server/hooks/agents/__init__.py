"""The agents whose hooks feed dreamwell (docs/claude-code.md, docs/codex.md, docs/gemini.md,
docs/copilot.md): Claude Code, Codex, Gemini CLI and Copilot CLI. One hook core
(server/hooks/events.py) runs every event; an agent is a small table of what differs — its
event names, how its stdin's prompt is cleaned of the context it echoed back, the shape of
what a hook prints, and how its own transcript is read (server/hooks/transcript.py's bounded
reading, the agent's line reader). The agent reaches the core as a prefix of the hook's
event (`gemini:user-prompt`); no prefix is Claude Code.

core.py holds the Agent table and the event names; claude.py, codex.py, gemini.py and
copilot.py one agent each (a new agent: one module here, one row in table.py). The config
each agent's install writes is in server/cli/agents/.

Public: core.Agent, core.agent_of, core.HOOK_EVENTS, core.AGENTS."""

# What this package's modules may import besides each other (a module or a package and
# everything under it), checked by tests/test_layers.py: nothing else, and every entry used.
MAY_IMPORT = ("dreamwell.server.hooks.transcript",)
