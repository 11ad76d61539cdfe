"""`dreamwell skills list|show|import|export|archive|restore|pin|approve`: one small function
per action, and the skills lines of `dreamwell stats`. Only argparse is imported at the top:
each action imports the store it needs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dreamwell.server.config import Settings
    from dreamwell.stores import Skill, SkillCatalog, UsageStats

ACTIONS = {
    "list": "the skills with status, uses in 30 days and last use",
    "show": "one skill: its bookkeeping, files and SKILL.md",
    "import": "read a skill folder, a tree of them or a .zip",
    "export": "write skills as folders Claude Code reads (~/.claude/skills/<name>/SKILL.md)",
    "archive": "stop serving a skill (kept, restorable)",
    "restore": "serve an archived skill again",
    "pin": "keep a skill as it is: the dream never changes it",
    "approve": "serve a candidate skill the dream proposed",
}


def _common(parser: argparse.ArgumentParser) -> None:
    """--tenant and the settings flags after the action too (`skills list --data-dir D`);
    SUPPRESS keeps a flag given before the action from being reset."""
    from dreamwell.server.flags import SETTINGS, settings_of

    parser.add_argument("--tenant", default=argparse.SUPPRESS, help="a tenant's skills")
    for name in settings_of("skills"):
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, default=argparse.SUPPRESS, help=SETTINGS[name].meaning)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", help="a tenant's skills instead of the default")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, text in ACTIONS.items():
        one = sub.add_parser(action, help=text, description=text[0].upper() + text[1:] + ".")
        _common(one)
        if action == "list":
            one.add_argument("--status", choices=["active", "candidate", "archived", "all"])
        elif action == "import":
            one.add_argument("path", metavar="PATH", help="a folder, a tree of folders or a .zip")
            one.add_argument("--replace", action="store_true", help="update skills that exist")
            one.add_argument("--candidate", action="store_true", help="import for review")
        elif action == "export":
            one.add_argument("--to", required=True, metavar="DIR", help="e.g. ~/.claude/skills")
            one.add_argument("names", nargs="*", metavar="NAME", help="default: every active one")
        elif action == "pin":
            one.add_argument("name", metavar="NAME")
            one.add_argument("--off", action="store_true", help="unpin")
        else:
            one.add_argument("name", metavar="NAME")


def _catalog(settings: Settings, tenant: str | None) -> tuple[SkillCatalog, Path]:
    from dreamwell.stores import DataDir, SkillCatalog

    root = DataDir(settings.data_dir).tenant(settings.known_tenant(tenant) if tenant else "").root
    return SkillCatalog(root), root


def _usage(root: Path) -> UsageStats:
    from dreamwell.stores import SkillUsage

    return SkillUsage(root).stats()


def _line(skill: Skill, usage: UsageStats) -> str:
    pinned = " pinned" if skill.pinned else ""
    last = usage.last_used.get(skill.name, "never")[:16]
    uses = usage.uses_30d.get(skill.name, 0)
    text = skill.description if len(skill.description) <= 60 else skill.description[:59] + "…"
    return f"{skill.name}  [{skill.status}{pinned}]  uses {uses}, last {last}  — {text}"


def skills_list(catalog: SkillCatalog, root: Path, args: argparse.Namespace) -> int:
    status = None if args.status in (None, "all") else args.status
    skills = catalog.list(status)
    usage = _usage(root)
    out = [_line(s, usage) for s in skills] or ["No skills yet: dreamwell skills import PATH"]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def skills_show(catalog: SkillCatalog, root: Path, args: argparse.Namespace) -> int:
    skill = catalog.get(args.name)
    head = [
        _line(skill, _usage(root)),
        f"id {skill.id}, revision {skill.revision}, origin {skill.origin}, "
        f"created {skill.created_at[:19]}, updated {skill.updated_at[:19]}",
        "files: " + ", ".join(f"{p} ({len(d):,} bytes)" for p, d in sorted(skill.files.items())),
        "",
    ]
    sys.stdout.write("\n".join(head) + skill.skill_md)
    return 0


def skills_import(catalog: SkillCatalog, root: Path, args: argparse.Namespace) -> int:
    from dreamwell.stores import import_skills

    status = "candidate" if args.candidate else "active"
    written = import_skills(catalog, Path(args.path), replace=args.replace, status=status)
    for skill in written:
        sys.stdout.write(f"imported {skill.name} (revision {skill.revision}, {skill.status})\n")
    return 0


def skills_export(catalog: SkillCatalog, root: Path, args: argparse.Namespace) -> int:
    from dreamwell.stores import export_skills

    dest = Path(args.to).expanduser()
    folders = export_skills(catalog, dest, names=args.names, usage=_usage(root))
    sys.stdout.write(f"exported {len(folders)} skills to {dest}\n")
    return 0


def skills_archive(catalog: SkillCatalog, root: Path, args: argparse.Namespace) -> int:
    catalog.archive(args.name)
    sys.stdout.write(f"archived {args.name}\n")
    return 0


def skills_restore(catalog: SkillCatalog, root: Path, args: argparse.Namespace) -> int:
    catalog.restore(args.name)
    sys.stdout.write(f"restored {args.name}\n")
    return 0


def skills_pin(catalog: SkillCatalog, root: Path, args: argparse.Namespace) -> int:
    catalog.pin(args.name, not args.off)
    sys.stdout.write(f"{'unpinned' if args.off else 'pinned'} {args.name}\n")
    return 0


def skills_approve(catalog: SkillCatalog, root: Path, args: argparse.Namespace) -> int:
    catalog.approve(args.name)
    sys.stdout.write(f"approved {args.name}: served to clients now\n")
    return 0


RUN = {
    "list": skills_list,
    "show": skills_show,
    "import": skills_import,
    "export": skills_export,
    "archive": skills_archive,
    "restore": skills_restore,
    "pin": skills_pin,
    "approve": skills_approve,
}


WRITES = ("import", "archive", "restore", "approve")  # actions that change what is active


def skills_command(settings: Settings, args: argparse.Namespace) -> int:
    """Runs one action; store errors reach `main`, which prints them as one line. An action
    that changed the active skills brings Claude Code's skill folders in step at once (when
    they are kept: stores/skills/sync.py), so the next session loads them as they are now."""
    catalog, root = _catalog(settings, args.tenant)
    code = RUN[args.action](catalog, root, args)
    if args.action in WRITES:
        from dreamwell.stores.skills import sync_skills

        for report in sync_skills(catalog):
            for name, why in sorted(report.clashes.items()):
                sys.stdout.write(f"not written: {report.target / name}: {why}\n")
    return code


def stats_lines(data_dir: Path) -> list[str]:
    """The skills part of `dreamwell stats` for one store."""
    from dreamwell.stores import SkillCatalog

    skills = SkillCatalog(data_dir).list()
    if not skills:
        return ["  skills: none"]
    usage = _usage(data_dir)
    counts = {
        s: sum(1 for k in skills if k.status == s) for s in ("active", "candidate", "archived")
    }
    lines = ["  skills: " + ", ".join(f"{n} {s}" for s, n in counts.items())]
    lines += folder_lines(data_dir)
    used = sorted(usage.uses_30d.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    for name, n in used:
        lines.append(f"    {name}: {n} uses in 30 days, last {usage.last_used[name][:16]}")
    for a, b, n in usage.co_used[:5]:
        lines.append(f"    used together: {a} + {b} ({n} sessions)")
    return lines


def folder_lines(data_dir: Path) -> list[str]:
    """Where the skills are kept as Claude Code's skill folders, and what could not be."""
    from dreamwell.stores import DataDir
    from dreamwell.stores.skills import loadable, sync_clashes, sync_target

    dirs = DataDir(data_dir)
    target = sync_target(dirs)
    if target is None:
        return []
    lines = [f"    kept as Claude Code skill folders in {target}: {len(loadable(dirs))}"]
    for folder, found in sorted(sync_clashes(dirs).items()):
        lines += [f"    not written: {Path(folder) / n}: {why}" for n, why in sorted(found.items())]
    return lines


def folder_problems(data_dir: Path) -> list[tuple[str, str]]:
    """For `dreamwell doctor`: (what, fix) of each skill Claude Code cannot load because its
    folder could not be written."""
    from dreamwell.stores import DataDir
    from dreamwell.stores.skills import sync_clashes

    out = []
    for folder, found in sorted(sync_clashes(DataDir(data_dir)).items()):
        for name, why in sorted(found.items()):
            what = f"skill {name} is not a Claude Code skill folder: {Path(folder) / name}: {why}"
            fix = f"move {Path(folder) / name} away (or rename one of the two skills)"
            out.append((what, fix))
    return out
