"""``fwdlint``: the command-line front end (thin: parse options, call the engine, print).

Exit status: 0 clean, 1 findings, 2 usage error or a file that could not be read or parsed
(every other file is still checked and reported).

``--fix`` / ``--diff`` (``lint_rules/fix/run.py``): the diff goes to stdout, ``not fixed`` lines and the
summary to stderr. ``--fix``: 0 nothing remains, 1 findings remain, 2 errors; ``--diff``: 1 if
anything would change or remains, 2 on errors.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from lint_rules import __version__, contract, environment, report
from lint_rules.diagnostics import FileError
from lint_rules.discover import python_files
from lint_rules.engine import Result, Run, analyse
from lint_rules.fix import run as fix
from lint_rules.project import Config
from lint_rules.settings import read_config, split_list


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fwdlint",
        description="Find nn.Module methods that run forward computation behind the back of "
                    "DDP, FSDP and Lightning Fabric.",
    )
    _input_options(parser)
    _output_options(parser)
    _fix_options(parser)
    parser.add_argument("--version", action="version", version=f"fwdlint {__version__}")
    return parser


def _input_options(parser: argparse.ArgumentParser) -> None:
    """What to check and how: paths, selection, configuration, project and environment."""
    parser.add_argument("paths", nargs="*", help="files and directories to check (none: nothing to do)")
    parser.add_argument("--select", help="comma-separated code prefixes to report (default: FWD)")
    parser.add_argument("--ignore", help="comma-separated code prefixes not to report")
    parser.add_argument("--exclude", help="comma-separated globs of files/directories to skip")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="parallel workers (0: one per CPU)")
    parser.add_argument("--module-bases", help="extra base classes that are nn.Module subclasses")
    parser.add_argument("--mark-decorators", help="your own decorators that apply runtime_shim's "
                        f"@{contract.DECORATOR_NAME} and so also mark an entry point "
                        f"(in addition to @{' and @'.join(contract.MARK_DECORATORS)} from {contract.DECORATOR_MODULE})")
    parser.add_argument("--project-root", type=Path, help="the project whose files make up the view every "
                        "file is checked with (default: nearest pyproject.toml, setup.cfg, setup.py or .git)")
    parser.add_argument("--cache-dir", type=Path, help="where the facts cache lives "
                        "(default: .fwdlint_cache under the project root)")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the facts cache")
    parser.add_argument("--python", metavar="PATH", help="the interpreter whose installed packages hold the "
                        "checked code's bases and attribute types (read, never imported; default: the "
                        "active virtual environment, else the interpreter running fwdlint)")


def _output_options(parser: argparse.ArgumentParser) -> None:
    """How findings are reported."""
    parser.add_argument("--format", choices=("text", "json"), default="text")


def _fix_options(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--fix", action="store_true", help="mark unmarked entry points in place")
    mode.add_argument("--diff", action="store_true", help="print the --fix changes as a unified diff, write nothing")
    parser.add_argument("--fix-style", choices=fix.STYLES, default="decorator",
                        help="decorator: add @forward_entry (default); call: add model.mark_forward_method(...) "
                             "after fabric.setup() / register_fsdp_forward_method(...) after fully_shard()")


def main(argv: Optional[Sequence[str]] = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # a file name the terminal cannot encode must not crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0) and 2
    if args.jobs < 0:
        parser.print_usage(sys.stderr)
        print("fwdlint: error: -j must be 0 or more", file=sys.stderr)
        return 2
    run = _run_options(args)
    if isinstance(run, int):
        return run
    walk_errors: list[tuple[str, str]] = []
    files = list(python_files(args.paths, run.exclude, errors=walk_errors))
    if args.fix or args.diff:
        return _fix(args, files, run, walk_errors)
    result = analyse(files, run)
    result.errors = sorted([*result.errors, *(FileError(path, reason) for path, reason in walk_errors)])
    return _report(args, result, run)


def _report(args: argparse.Namespace, result: Result, run: Run) -> int:
    """Print the findings and errors of an analysis; the exit status."""
    if args.format == "json":
        sys.stdout.write(report.as_json(result))
        if result.errors:
            sys.stderr.write(report.text(result)[1])
    else:
        out, err = report.text(result)
        sys.stdout.write(out)
        sys.stderr.write(err)
        if result.installed_read:
            print(f"fwdlint: read {result.installed_read} installed file(s) of {run.environment.python} to resolve names",
                  file=sys.stderr)
    if result.errors:
        return 2
    return 1 if result.diagnostics else 0


def _run_options(args: argparse.Namespace) -> Run | int:
    """The run the options and the configuration ask for, or an exit status after a one-line error."""
    settings = read_config(Path.cwd())

    def option(name: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        value = getattr(args, name.replace("-", "_"))
        return split_list(value) if value is not None else settings.get(name, default)

    config = Config(
        module_bases=option("module-bases"),
        mark_decorators=option("mark-decorators"),
    )
    python = args.python or " ".join(settings.get("python-executable", ())) or None
    try:
        env = environment.find(python)
    except environment.NoInterpreter as exc:
        print(f"fwdlint: error: {exc}", file=sys.stderr)
        return 2
    return Run(config=config, select=option("select", ("FWD",)), ignore=option("ignore"), environment=env,
               jobs=args.jobs or os.cpu_count() or 1, project_root=args.project_root.resolve() if args.project_root
               else None, cache=not args.no_cache, cache_dir=args.cache_dir, exclude=option("exclude"))


def _fix(args: argparse.Namespace, files: list[str], options: Run, walk_errors: list[tuple[str, str]]) -> int:
    run = fix.plan(files, options, style=args.fix_style) if args.diff else fix.fix_in_passes(
        files, options, style=args.fix_style)
    run.errors = sorted([*run.errors, *(FileError(path, reason) for path, reason in walk_errors)])
    return _fix_report(args, run)


def _fix_report(args: argparse.Namespace, run: fix.FixRun) -> int:
    """Print a fix run (the diff to stdout, the rest to stderr); the exit status."""
    if args.diff:
        for file in run.changed:
            sys.stdout.flush()
            sys.stdout.buffer.write(fix.unified_diff(file))
    for line in fix.report_lines(run):
        print(line, file=sys.stderr)
    for error in run.errors:
        print(f"{report.shown(error.path)}: error: {error.message}", file=sys.stderr)
    done = "would fix" if args.diff else "fixed"
    if run.fixed or run.unfixed:
        print(f"fwdlint: {done} {len(run.fixed)} finding(s) in {len({f.path for f in run.changed})} file(s), "
              f"{len(run.unfixed)} not fixed", file=sys.stderr)
    return fix.exit_status(run, diff=args.diff)


if __name__ == "__main__":
    sys.exit(main())
