"""The `causal-conv1d` command (also `python -m causal_conv1d`): parses, dispatches to the
command's module, and turns every error into one line.

Each command is a module `_cmd_<name>.py` defining HELP, add_arguments(parser) and run(args)
(returning the exit status); it is registered by one line in COMMANDS. Those modules import
torch lazily, so `--version` and a wrong flag answer at once.

Errors: a wrong flag or value is one line naming the fix (exit 2); an error raised by a command
is one line, `causal-conv1d <command>: <what went wrong>` (exit 1), unless --traceback asks for
the whole stack.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Optional, Sequence

COMMANDS = (
    "report",
    "doctor",
    "demo",
    "cache",
    "precompile",
)


class UsageError(Exception):
    """A command line the parser rejects; the message names the fix."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints usage and exits; we want one line
        raise UsageError(f"{message}; see '{self.prog} --help'")


def make_parser() -> argparse.ArgumentParser:
    from ._version import __version__

    p = _Parser(prog="causal-conv1d", description="causal-conv1d: diagnose the installation, report, demo.")
    p.add_argument("--version", action="version", version=f"causal-conv1d {__version__}")
    p.add_argument("--traceback", action="store_true", help="show the full Python traceback of an error")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    for name in COMMANDS:
        module = importlib.import_module(f"._cmd_{name}", __package__)
        cmd = sub.add_parser(name, help=module.HELP, description=module.__doc__ or module.HELP,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        # Also after the command; SUPPRESS keeps the subparser from overriding an earlier flag.
        cmd.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS,
                         help="show the full Python traceback of an error")
        module.add_arguments(cmd)
        cmd.set_defaults(run=module.run)
    return p


def one_line(e: BaseException) -> str:
    """The error's message on one line (newlines and runs of spaces collapsed)."""
    return " ".join(str(e).split()) or "(no message)"


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as e:
        print(f"causal-conv1d: error: {e}", file=sys.stderr)
        return 2
    if getattr(args, "run", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print(f"causal-conv1d {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if args.traceback:
            raise
        print(f"causal-conv1d {args.command}: {type(e).__name__}: {one_line(e)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
