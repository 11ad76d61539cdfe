"""The dream's three skill passes (docs/skills.md, seed 001 passes 2–4): gap detection (gap.py),
consolidation (consolidate.py) and optimisation (optimize.py), run in order by passes.py; the
host's arithmetic, guards and SKILL.md text as pure functions (rules.py); every write
compare-and-set and undoable (commit.py).

Public: passes.SKILL_PASSES, passes.run_skill_passes, commit.undo_skills. May import: the
dream's root modules (answers, llm, report, directives), dreamwell.stores' public names."""
