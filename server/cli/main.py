"""The `dreamwell` command line: one small function per command.

Parsing imports nothing heavy (no MCP SDK, LanceDB, onnxruntime or Tantivy), so `--help` is
fast; each command imports what it needs. Flags that set a setting come from the Settings
model (`flag_for` on each field), the rest are the command's own arguments."""

from __future__ import annotations

import os
import sys

# Nothing else at the top: this module is the console script, and `serve`'s first reply to
# its client waits for what is imported before the early reader starts (`_early_stdio`).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from pathlib import Path
    from typing import NoReturn

    from dreamwell.server.config import Settings
    from dreamwell.server.transports.early import EarlyStdio

    Command = Callable[[Settings, argparse.Namespace], int]


def attach_remote(settings: Settings) -> None:
    """An object-store `data_dir`: check it can be reached (StoreError: one line) and mark
    the cache directory as its cache, for this command and any process that opens it."""
    remote = settings.remote()
    if remote is not None:
        from dreamwell.stores.remote import attach

        attach(settings.data_dir, remote)


def tenant_dir(settings: Settings, tenant: str | None) -> Path:
    """The data directory of `tenant` (the root's without one); an unknown tenant is refused
    (ValueError: one line naming the known ones)."""
    if not tenant:
        return settings.data_dir
    return settings.data_dir / "tenants" / settings.known_tenant(tenant)


def served_at(settings: Settings) -> str:
    """Where `serve` over HTTP answers: the MCP endpoint and, on streamable HTTP, the
    browser beside it."""
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    port = settings.port or "<a free port>"
    base = f"http://{host}:{port}"
    if settings.transport == "sse":
        return f"dreamwell serve: MCP over SSE at {base}/sse (Ctrl-C stops it)"
    return f"dreamwell serve: MCP at {base}/mcp, the memory browser at {base}/ (Ctrl-C stops it)"


# ---- commands ------------------------------------------------------------------------------
def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    from dreamwell.server.cli.stats import ensure_format
    from dreamwell.server.config import LOOPBACK

    if (
        settings.transport != "stdio"
        and settings.host not in LOOPBACK
        and not settings.tenant_tokens()
    ):
        from dreamwell.server.cli.outcome import fail

        return fail(
            f"refusing to bind {settings.host}: a non-loopback address needs bearer "
            "tokens (--token or --tokens-file)",
            2,
        )
    ensure_format(settings.data_dir)
    early: EarlyStdio | None = args.early
    if early is not None:
        early.ready()  # the settings and the data directory are fine: answer the handshake
    import logging

    import anyio

    from dreamwell.server.transports.early import WATCHED
    from dreamwell.server.transports.serve import serve

    if settings.transport == "stdio" and sys.stdin.isatty():
        sys.stderr.write(
            "dreamwell: serving MCP on stdin/stdout and waiting for an MCP client; an agent "
            "starts this itself (see 'Connect a client' in README.md). Ctrl-D or Ctrl-C stops.\n"
        )
    elif settings.transport != "stdio":
        sys.stderr.write(served_at(settings) + "\n")
    handover = early.hand_over() if early is not None else None
    logger = logging.getLogger("dreamwell")
    if handover is not None and handover.listed:
        logger.info(
            "answered %s before loading the server, as the last server did",
            ", ".join(sorted(set(handover.listed.values()))),
        )
    if handover is not None and handover.loaded_then is not None:
        logger.info(
            "answered the handshake before loading the server; of %s, loaded then: %s",
            ", ".join(WATCHED),
            ", ".join(handover.loaded_then) or "none",
        )
    code: int = anyio.run(serve, settings, handover if settings.transport == "stdio" else None)
    if settings.transport == "stdio":
        _leave_now(code)
    return code


def _leave_now(code: int) -> NoReturn:
    """A stdio server that has stopped leaves without the interpreter's teardown, which took
    ~0.8 s of CPU after serving ended (freeing what LanceDB, pyarrow and the SDK hold) while
    its client waited for the process (Claude Code, at the end of every session): every
    acknowledged write is in the fsynced log and file locks go with the process."""
    import logging

    logging.shutdown()
    _flush()
    os._exit(code)


def _flush() -> None:
    import contextlib

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # the reader left, or it was closed
            stream.flush()


def cmd_dream(settings: Settings, args: argparse.Namespace) -> int:
    from dreamwell.server.cli.dream import run_dream_command
    from dreamwell.server.flags import parse_every

    if args.every is not None:  # usage errors (exit 2) before any store is opened
        try:
            parse_every(args.every)
        except ValueError as exc:
            raise ValueError(f"--every: {exc}") from None
    tenant_dir(settings, args.tenant)

    return run_dream_command(args, settings)


def cmd_log(settings: Settings, args: argparse.Namespace) -> int:
    from dreamwell.stores import CONVERSATION, FEEDBACK, JsonlLog

    record = (
        {"session": args.session, "role": args.role, "content": args.text}
        if args.log == "conversation"
        else {"session": args.session, "kind": args.kind, "detail": args.text}
        | ({"memory_id": args.memory_id} if args.memory_id else {})
    )
    if not args.text.strip():
        from dreamwell.server.cli.outcome import fail

        return fail(f"the {args.log} text is empty; say what to log", 2)
    name = CONVERSATION if args.log == "conversation" else FEEDBACK
    JsonlLog(tenant_dir(settings, args.tenant), name).append(record)
    return 0


def cmd_export(settings: Settings, args: argparse.Namespace) -> int:
    from dreamwell.server.cli.porting import export_command, vector_model

    return export_command(tenant_dir(settings, args.tenant), args, vector_model(settings))


def cmd_import(settings: Settings, args: argparse.Namespace) -> int:
    from dreamwell.server.cli.porting import import_command

    return import_command(tenant_dir(settings, args.tenant), args)


def cmd_stats(settings: Settings, args: argparse.Namespace) -> int:
    from dreamwell.server.cli.stats import stats_command

    return stats_command(settings)


def cmd_doctor(settings: Settings, args: argparse.Namespace) -> int:
    from dreamwell.server.cli.doctor import doctor_command

    return doctor_command(settings, args.tenant)


def cmd_ui(settings: Settings, args: argparse.Namespace) -> int:
    from dreamwell.server.cli.ui import ui_command

    return ui_command(settings)


def cmd_reindex(settings: Settings, args: argparse.Namespace) -> int:
    from dreamwell.server.cli.porting import progress
    from dreamwell.server.dreaming import tenant_names
    from dreamwell.server.runtime import Runtime

    runtime = Runtime(settings)
    names = tenant_names(runtime, args.tenant)
    with progress(len(names), "reindexing", " stores") as bar:
        for name in names:
            store = runtime.open_tenant(name).longterm
            count = store.count()
            store.reindex()
            bar.update(1)
            label = f"tenant {name}" if name else "root store"
            if bar.disable:
                sys.stderr.write(f"reindexed {label}: {count} memories\n")
    return 0


def cmd_skills(settings: Settings, args: argparse.Namespace) -> int:
    from dreamwell.server.cli.skills import skills_command

    return skills_command(settings, args)


def cmd_hook(settings: Settings, args: argparse.Namespace) -> int:
    from dreamwell.server.hooks.events import hook_command
    from dreamwell.server.hooks.settings import from_settings

    return hook_command(from_settings(settings), args.event, args.tenant)


def cmd_install(settings: Settings, args: argparse.Namespace) -> int:
    from dreamwell.server.cli.install import install_command

    return install_command(settings, args)


def cmd_config(settings: Settings, args: argparse.Namespace) -> int:
    from dreamwell.server.cli.config_command import config_command

    return config_command(settings, args)


COMMANDS: dict[str, Command] = {
    "serve": cmd_serve,
    "dream": cmd_dream,
    "log": cmd_log,
    "export": cmd_export,
    "import": cmd_import,
    "stats": cmd_stats,
    "doctor": cmd_doctor,
    "ui": cmd_ui,
    "reindex": cmd_reindex,
    "skills": cmd_skills,
    "hook": cmd_hook,
    "install": cmd_install,
    "config": cmd_config,
}


def _one_blas_thread() -> None:
    """A search's cosine scan is one matrix-vector product: memory-bound, so extra BLAS
    threads buy little, and on a small or busy machine they spin against the embedder and
    other processes (10,000 × 384 under load: 6.5-8 ms with OpenBLAS's threads, 1.1-1.4 ms
    with one). Must run before numpy is imported; an explicit setting wins."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def parser() -> argparse.ArgumentParser:
    """The whole command line's parser (server/cli/parsing.py)."""
    from dreamwell.server.cli.parsing import parser as whole

    return whole()


def main(argv: Sequence[str] | None = None) -> None:
    os.umask(0o077)  # what this process and its children create is private (stores/files.py)
    _one_blas_thread()
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["hook"]:
        raise SystemExit(_hook(given))
    early = _early_stdio(given)  # first: the client's handshake waits for nothing below
    import logging

    from dreamwell.server.cli.parsing import BadSetting, read_settings
    from dreamwell.server.flags import settings_of
    from dreamwell.server.heap import steady_malloc

    steady_malloc()
    args = parser().parse_args(given)
    args.early = early
    command: str = args.command
    try:
        settings = read_settings(args, settings_of(command))
    except BadSetting as exc:
        from dreamwell.server.cli.outcome import refuse

        raise SystemExit(refuse(early, str(exc), 2)) from None
    logging.basicConfig(
        stream=sys.stderr,
        level=settings.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for line in settings.fell_back:  # a bad setting never switches memory off: it is said
        sys.stderr.write(f"dreamwell: {line}\n")
    from dreamwell.server.cli.outcome import run_command

    if command not in SERVING:  # from here on run_command says a Ctrl-C, how far it got
        _loaded()  # (a server's own signal receiver takes over from the loading's: ui.py)

    def run(settings: Settings, args: argparse.Namespace) -> int:
        attach_remote(settings)
        return COMMANDS[command](settings, args)

    raise SystemExit(run_command(run, command, settings, args, early))


def _hook(given: list[str]) -> int:
    """`dreamwell hook`: exits 0 whatever it was given; a short process Claude Code waits for,
    which imports only what its event needs (not this command line's parser)."""
    from dreamwell.server.cli.hook import hook_main

    return hook_main(given)


def _early_stdio(given: list[str]) -> EarlyStdio | None:
    """For `serve` on stdio: the handshake answered while the server loads (see
    server/transports/early.py); started before anything else is imported or parsed, with
    the standard library alone (the first reply waits for every import before it: the data
    directory's layout module alone cost ~50 ms). Then the data directory is checked: kept
    lists that vouch (early_lists.py) were kept beside its mark as it is now, so one that
    cannot hold a store vouches for nothing, and the client hears why in the handshake. With
    lists that vouch, the check (the stores' layout: ~60 ms of imports) waits with the rest
    of the loading until a frame needs the server (`EarlyStdio.idle`): a failure then reaches
    the client as the answer to that frame."""
    if given[:1] != ["serve"]:
        return None
    import _signal  # type: ignore[import-not-found]  # `signal` imports `enum`: ~10 ms

    # Claude Code stops a server with SIGINT: while loading, leave without a traceback on
    # stderr, which it logs as an error (nothing is written before serving starts); Ctrl-C
    # at a terminal is one line and 130, as everywhere (transports/serve.py `by_hand`)
    if sys.stdin.isatty():
        _signal.signal(_signal.SIGINT, _interrupted_at_terminal)
    else:
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    from dreamwell.server.transports import early

    if not early.wanted(_flag(given, "--transport")):
        return None
    from dreamwell.server.transports.early_lists import ListCache, cache_key, kept_in
    from dreamwell.server.where import data_dir

    flag = _flag(given, "--data-dir")
    # an object store is reached once the settings are read: no lists, no check here
    remote = "://" in (flag or os.environ.get("DREAMWELL_DATA_DIR") or "")
    root = None if remote else data_dir(flag)
    lists = None if root is None else ListCache(kept_in(root), cache_key())
    started = early.EarlyStdio(lists=lists).start()
    started.idle()  # nothing loads beside the client's start that no frame needs yet
    if started.finished():  # the client left with all it asked answered from the kept lists
        raise SystemExit(0)
    if root is not None:
        from pathlib import Path

        from dreamwell.stores import DataDir

        problem = DataDir(Path(root)).unusable()
        if problem is not None:  # before the settings: the client hears this, whatever else
            from dreamwell.server.cli.outcome import refuse

            raise SystemExit(refuse(started, problem))
    return started


def _interrupted_at_terminal(_signum: int, _frame: object) -> None:
    sys.stderr.write("dreamwell: interrupted (Ctrl-C); the server is stopped\n")
    _flush()
    os._exit(130)


def _interrupted_while_loading(_signum: int, _frame: object) -> None:
    """Ctrl-C before a command began: nothing done to say, one line and 130 rather than a
    KeyboardInterrupt's traceback from whatever was being imported."""
    sys.stderr.write("dreamwell: interrupted (Ctrl-C)\n")
    _flush()
    os._exit(130)


def _loaded() -> None:
    """SIGINT back to Python's KeyboardInterrupt if `run` had taken it for the loading. Not
    for a server: a KeyboardInterrupt caught there still ended it by SIGINT, not 130, when
    it had passed through an `exec` of text (CPython marks it unhandled there, and each
    dataclass anyio makes as it loads is one)."""
    import _signal  # `signal` imports `enum`: ~10 ms

    if _signal.getsignal(_signal.SIGINT) is _interrupted_while_loading:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)


def _flag(given: list[str], name: str) -> str | None:
    """The value of a flag, read before the command line is parsed (the last one wins)."""
    found = None
    for at, word in enumerate(given):
        if word == name and at + 1 < len(given):
            found = given[at + 1]
        elif word.startswith(f"{name}="):
            found = word.partition("=")[2]
    return found


# Servers leave as Python leaves: their worker threads (anyio's, not daemons) may still be
# finishing a tool call or a checkpoint when serving ends, and a normal exit waits for them
# (serve's grace timer bounds the wait).
SERVING = frozenset({"serve", "ui"})


def run() -> NoReturn:
    """The `dreamwell` program: `main`; a command that is not a server then exits without
    the interpreter's finalising. LanceDB answers calls, and drops what it holds, from
    threads of its own: one doing so while the interpreter finalised aborted the process
    after its work was done (`dreamwell export` on object storage exited by SIGABRT or
    SIGSEGV in 1 of 200 runs, in 3 of 60 with a log poller that never sleeps; with this
    exit, in none of 120). Such a command has written and synced everything before it
    returns (files through descriptors, LanceDB's commits) and runs nothing after: only
    what sys.stdout, sys.stderr and logging buffer is left, and it is flushed here."""
    if sys.argv[1:2] not in (["serve"], ["hook"]):  # each says a Ctrl-C its own way
        import _signal

        _signal.signal(_signal.SIGINT, _interrupted_while_loading)
    if sys.argv[1:2] and sys.argv[1] in SERVING:
        main()
        raise SystemExit(0)
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = _status(exc.code)
    _flush()
    import logging  # loaded already by any command that logged

    logging.shutdown()
    os._exit(code)


def _status(code: object) -> int:
    """The exit status SystemExit(code) gives (a message is printed and gives 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1
