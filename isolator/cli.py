"""The ``isolator`` command.  It only parses and dispatches; the work is in the stages."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

USAGE = """\
usage: isolator run [--reset=none|minimal|full|fork] [pytest args...]
       isolator deps [options] [pytest args...]
       isolator explain NODEID
       isolator --version

run      run pytest with isolation between tests (default --reset=minimal); every other
         argument goes to pytest unchanged, and the exit code is pytest's
deps     find the order dependencies between tests (see `isolator deps --help`)
explain  say why a test depends on others, with the shared state, from .isolator/deps.json
"""

_SUBCOMMANDS = {
    "deps": ("isolator._deps_cli", "main"),
    "explain": ("isolator._deps_cli", "explain"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0 if args else 2
    if args[0] == "--version":
        from isolator import __version__

        sys.stdout.write(f"isolator {__version__}\n")
        return 0
    cmd, rest = args[0], args[1:]
    try:
        os.getcwd()
    except OSError as exc:
        # (Every command works from the current directory: pytest's rootdir, .isolator/.)
        sys.stderr.write(
            f"isolator: the current directory is gone ({exc.strerror}); run from an existing "
            "directory\n"
        )
        return 4
    try:
        if cmd == "run":
            status = run(rest)
            if argv is None:
                # The `isolator` program itself (not a caller of main()): nothing of this
                # process outlives it, so skip the interpreter's teardown.
                from isolator._supervise import exit_now

                exit_now(status)
            return status
        if cmd in _SUBCOMMANDS:
            modname, func = _SUBCOMMANDS[cmd]
            try:
                mod = importlib.import_module(modname)
            except ImportError:
                sys.stderr.write(f"isolator: `{cmd}` is not available in this build\n")
                return 2
            code: int = getattr(mod, func)(rest)
            return code
    except KeyboardInterrupt:
        sys.stderr.write("isolator: interrupted\n")
        return 130
    sys.stderr.write(f"isolator: unknown command {cmd!r}; try `isolator --help`\n")
    return 2


def run(args: list[str]) -> int:
    """``isolator run``: pytest with isolator, supervised so that crashes do not end the run."""
    from isolator._supervise import supervise

    if any(a in ("-h", "--help") for a in args):
        sys.stdout.write(USAGE)
        return 0
    for a in args:
        if a.startswith("--reset") and a not in ("--reset",) and "=" in a:
            mode = a.split("=", 1)[1]
            if mode not in ("none", "minimal", "full", "fork"):
                sys.stderr.write(
                    f"isolator: --reset={mode} is not a mode; use none, minimal, full or fork\n"
                )
                return 2
    # Without --reset, pyproject.toml's mode or minimal: decided where pytest starts, so
    # that this process reads no configuration before it starts the test process.
    default_reset = not any(a == "--reset" or a.startswith("--reset=") for a in args)
    return supervise(args, default_reset)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
