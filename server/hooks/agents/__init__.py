"""The agents whose hooks feed dreamwell (SPEC §13): Claude Code, Codex, Gemini CLI and Copilot
CLI. One hook core (server/hooks/events.py) runs every event; an agent is a small table of
what differs — its event names, how its stdin's prompt is cleaned of the context it echoed
back, the shape of what a hook prints, and how its own transcript is read
(server/hooks/transcript.py's bounded reading, the agent's line reader). The agent reaches
the core as a prefix of the hook's event (`gemini:user-prompt`); no prefix is Claude Code.

core.py holds the Agent table and the event names; claude.py, codex.py, gemini.py and
copilot.py one agent each. The config each agent's install writes is in server/cli/.

Public: core.Agent, core.agent_of, core.HOOK_EVENTS, core.AGENTS.
May import: server.hooks.transcript, server.hooks.client (constants), the standard library."""
