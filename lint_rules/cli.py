"""``fwdlint``: the command-line front end (thin: parse options, call the engine, print).

No paths means the current directory (as in flake8 and ruff). Options come from the command line
and the configuration file ``settings`` finds (``--config``, ``--isolated``); an option given
replaces the file's key.

Exit status: 0 clean, 1 findings, 2 usage error or a file that could not be read or parsed
(every other file is still checked and reported), or a configuration that cannot be used
(unknown key, bad value, unparsable file: one line naming the file and the key). ``--exit-zero``:
0 whatever was found or could not be checked; usage and configuration errors stay 2.

Reports: ``report.py`` (text, json, github) and ``sarif.py``. ``--fix`` / ``--diff``
(``lint_rules/fix/run.py``): the diff goes to stdout, ``not fixed`` lines and the summary to stderr
(``--format json``: one JSON fix report on stdout). ``--fix``: 0 nothing remains, 1 findings remain,
2 errors; ``--diff``: 1 if anything would change or remains, 2 on errors.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Optional, Sequence

from lint_rules import __version__, contract, stop_parser_processes

if TYPE_CHECKING:
    from lint_rules import environment, run_record, settings
    from lint_rules.engine import Result, Run
    from lint_rules.fix.run import FixRun

# ``--version`` and ``--help`` import nothing but argparse and ``contract``: the engine, the store,
# the reports and the fixers are imported by the code that uses them (tests/test_startup.py).

#: ``report.FORMATS`` and ``fix.run.STYLES``, named here so that building the parser imports
#: neither (tests/test_cli.py keeps them equal).
FORMATS = ("text", "json", "github", "sarif")
FIX_STYLES = ("decorator", "call")


class _Formatter(argparse.HelpFormatter):
    """argparse's, with the terminal's width read as ``shutil.get_terminal_size`` reads it, without
    importing ``shutil`` (and the compression modules it imports): argparse makes a formatter for
    every option added, so every run would pay for it."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: Optional[int] = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


def _columns() -> int:
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fwdlint", formatter_class=_Formatter,
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
    parser.add_argument("paths", nargs="*", default=["."],
                        help="files and directories to check (default: the current directory); - alone: "
                             "standard input")
    parser.add_argument("--stdin-filename", metavar="PATH", help="with -: the path the text read from standard "
                        "input stands for (its name in the report, its configuration, per-file-ignores and project; "
                        "it replaces that file in the project view). --fix prints the fixed text on stdout")
    parser.add_argument("--select", help="comma-separated code prefixes to report (default: FWD)")
    parser.add_argument("--ignore", help="comma-separated code prefixes not to report")
    parser.add_argument("--extend-select", help="code prefixes to report in addition to --select and the "
                        "configuration's select and extend-select")
    parser.add_argument("--extend-ignore", help="code prefixes not to report, in addition to --ignore and the "
                        "configuration's ignore and extend-ignore")
    parser.add_argument("--exclude", help="comma-separated globs of files/directories to skip, as in flake8: "
                        "one holding a / is relative to the current directory and matches whole paths "
                        "(mymodels/vae.py, mymodels/*, sub/), one without matches any file or directory "
                        "name (vae.py, build_*)")
    parser.add_argument("--per-file-ignores", metavar="PATTERN:CODES", help="codes not to report in the files "
                        "a pattern names, as in flake8 ('tests/*:FWD001 scripts/*.py:FWD002,FWD003'); "
                        "patterns match as in --exclude")
    parser.add_argument("--config", metavar="PATH", help="read the configuration from this file only "
                        "([fwdlint], or [tool.fwdlint] in a .toml file; default: the first pyproject.toml, "
                        "setup.cfg, tox.ini or .flake8 with one, from the checked paths upwards)")
    parser.add_argument("--isolated", action="store_true", help="read no configuration file")
    parser.add_argument("-j", "--jobs", type=int, default=None, help="parser processes (0: one per CPU; default: "
                        "one per CPU when enough files need parsing to repay starting them, else 1)")
    parser.add_argument("--module-bases", help="extra base classes that are nn.Module subclasses")
    parser.add_argument("--mark-decorators", help="comma-separated names of your own decorators that apply "
                        f"runtime_shim's @{contract.DECORATOR_NAME} and so also mark an entry point, in addition "
                        f"to @{' and @'.join(contract.MARK_DECORATORS)} from {contract.DECORATOR_MODULE}, which "
                        "always count (a dotted name matches that name only, a bare one any decorator so named)")
    parser.add_argument("--forward-helpers", choices=contract.FORWARD_HELPERS, help="FWD001 on methods the project "
                        "calls only from forward (directly or through helpers): report them (the default; the "
                        "message says so) or skip them")
    parser.add_argument("--project-root", type=Path, help="the project whose files make up the view every "
                        "file is checked with (default: nearest pyproject.toml, setup.cfg, setup.py or .git)")
    parser.add_argument("--cache-dir", type=Path, help="where the facts cache lives "
                        "(default: .fwdlint_cache under the project root)")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the facts cache")
    parser.add_argument("--from-record", metavar="PATH", help="also report the unmarked forward entries a run "
                        "recorded (pytest --fwd-record PATH, or FWD_SHIM_MODE=record with FWD_RECORD=PATH) as FWD004, "
                        "where FWD001 did not find them; --fix marks them; --statistics adds the static analysis' "
                        "recall on that run")
    parser.add_argument("--python", metavar="PATH", help="the environment whose installed packages hold the "
                        "checked code's bases and attribute types: a virtual environment or conda prefix, or an "
                        "interpreter (read from its files, never imported; default: $VIRTUAL_ENV, $CONDA_PREFIX, "
                        "the project's .venv, else the interpreter running fwdlint)")


def _output_options(parser: argparse.ArgumentParser) -> None:
    """How findings are reported (``report.py``, ``sarif.py``), and ``--explain``."""

    class Explain(argparse.Action):
        """Print a rule's documentation and stop, like ``--version`` (0; an unknown code: one line, 2)."""

        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: object,
                     option: object = None) -> None:
            from lint_rules import rule_docs

            rule = rule_docs.rule_for(str(value))
            if rule is None:
                parser.exit(2, f"fwdlint: error: --explain {value}: no such rule "
                               f"(codes: {', '.join(rule_docs.rules.CODES)})\n")
            sys.stdout.write(rule_docs.documentation(rule) + "\n")
            parser.exit(0)

    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="text (default), json, github (Actions workflow commands) or sarif (SARIF 2.1.0)")
    parser.add_argument("--output-file", metavar="PATH", help="write the report (what would go to stdout) "
                        "to PATH, replacing it atomically; errors stay on stderr")
    parser.add_argument("--statistics", action="store_true", help="count the findings per code, after the "
                        "report (on stderr for json and sarif, which stay one document)")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings or files that "
                        "could not be checked (as flake8 and ruff); 2 stays for usage and configuration errors")
    parser.add_argument("-v", "--verbose", action="store_true", help="say on stderr which environment "
                        "installed packages are read from (said anyway when any was read, unless --quiet)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print findings, errors and what was asked "
                        "for (--statistics, the diff), nothing else (no notes, no fix summary)")
    parser.add_argument("--show-source", action="store_true",
                        help="text format: under each finding, its source line and a caret under the column")
    parser.add_argument("--explain", metavar="CODE", action=Explain,
                        help="print a rule's documentation (code or short name) and exit")


def _fix_options(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--fix", action="store_true", help="mark unmarked entry points in place")
    mode.add_argument("--diff", action="store_true", help="print the --fix changes as a unified diff, write nothing")
    parser.add_argument("--fix-style", choices=FIX_STYLES, default="decorator",
                        help="decorator: add @forward_entry (default); call: register the method after every "
                             "set-up of its class with the wrapper's own call (model.mark_forward_method(...) "
                             "after fabric.setup(), register_fsdp_forward_method(...) after fully_shard(), "
                             "runtime_shim's mark_forward_method(ddp, ...) after DDP or FSDP)")
    parser.add_argument("--fix-edits", action="store_true",
                        help="--format json: each finding --fix would fix carries the edits it would make "
                             "(\"fix\": {\"edits\": [...]}, for an editor's quick fix); the fix is computed "
                             "as --fix computes it, nothing is written, so the run takes as long as --fix")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The ``fwdlint`` command; the exit status. Run as the program (``argv`` None: the console
    script, ``python -m lint_rules``), it ends the process itself once its output is out (``_exit_now``)."""
    code = _main(argv)
    if argv is None:
        _exit_now(code)
    return code


def _exit_now(code: int) -> NoReturn:
    """End the process without the interpreter's shutdown, as mypy's ``--fast-exit`` does: after a
    one-file edit of transformers, freeing the analysis's millions of objects one by one took 0.9 s
    of a 4.9 s run. The output is flushed and the parser processes stopped first; the cache is closed
    and every file written by then. Output that cannot be flushed (a closed pipe) ends it with 120,
    as Python's own shutdown would."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        code = 120
    stop_parser_processes()
    os._exit(code)


def _main(argv: Optional[Sequence[str]]) -> int:
    for stream in (sys.stdout, sys.stderr):  # a file name the terminal cannot encode must not crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0) and 2
    if args.jobs is not None and args.jobs < 0:
        parser.print_usage(sys.stderr)
        print("fwdlint: error: -j must be 0 or more", file=sys.stderr)
        return 2
    stdin = _stdin_path(args)
    if isinstance(stdin, int):
        return stdin
    run = _run_options(args)
    if isinstance(run, int):
        return run
    try:
        return _checked(args, run, stdin)
    finally:
        _progress_done(run)


def _progress_done(run: Run) -> None:
    """Clear the progress line, if one was drawn: before anything is printed, and at the end."""
    close = getattr(run.progress, "close", None)
    if close is not None:
        close()


def _checked(args: argparse.Namespace, run: Run, stdin: Optional[str]) -> int:
    """Check or fix what ``args`` names with ``run``; the exit status."""
    from lint_rules.diagnostics import FileError
    from lint_rules.discover import python_files
    from lint_rules.engine import analyse

    walk_errors: list[tuple[str, str]] = []
    if stdin is not None:
        run = _read_stdin(stdin, run)
        files = [stdin]
    else:
        files = list(python_files(args.paths, run.exclude, errors=walk_errors))
    if args.fix_edits and (args.format != "json" or args.fix or args.diff):
        print("fwdlint: error: --fix-edits adds the edits to the findings of a --format json check "
              "(without --fix or --diff)", file=sys.stderr)
        return 2
    if args.fix and stdin is not None:
        return _fix_stdin(args, stdin, run)
    if args.fix or args.diff:
        return _fix(args, files, run, walk_errors)
    result = analyse(files, run, reuse=not run.config.record)  # the record's summary reads the facts
    _progress_done(run)
    if result.reused and args.verbose:
        print("fwdlint: nothing the findings depend on changed: reporting the last run's", file=sys.stderr)
    result.errors = sorted([*result.errors, *(FileError(path, reason) for path, reason in walk_errors)])
    if run.config.record:
        from lint_rules.rules import fwd004_observed_entry as observed

        said = observed.summary(run.config.observed, list(result.views.values()), result.diagnostics, files)
        for line in said.lines(run.config.record, args.statistics):
            print(line, file=sys.stderr)
    return _report(args, result, run, files)


def _stdin_path(args: argparse.Namespace) -> Optional[str] | int:
    """``-``: the path standard input stands for (``--stdin-filename``, else ``stdin``), which then
    replaces ``args.paths`` (the configuration is found from it); None without ``-``; or exit 2."""
    if "-" not in args.paths:
        if args.stdin_filename:
            print("fwdlint: error: --stdin-filename names what - (standard input) stands for: give - as the path",
                  file=sys.stderr)
            return 2
        return None
    if len(args.paths) > 1:
        print("fwdlint: error: - (standard input) must be the only path", file=sys.stderr)
        return 2
    if args.fix and args.format != "text":
        print("fwdlint: error: --fix of standard input prints the fixed text: --format must be text", file=sys.stderr)
        return 2
    args.paths = [args.stdin_filename or "stdin"]
    return args.paths[0]


def _read_stdin(path: str, run: Run) -> Run:
    """Standard input stands for ``path`` from now on (``source.OVERLAY``); one process reads it."""
    from lint_rules.source import OVERLAY

    OVERLAY[os.path.realpath(path)] = sys.stdin.buffer.read()
    return run._replace(jobs=1)


def _fix_stdin(args: argparse.Namespace, path: str, options: Run) -> int:
    """``--fix -``: the fixed text on stdout (the text as read when nothing could be fixed), what was
    not fixed on stderr; the exit status of ``--fix``."""
    from lint_rules import report
    from lint_rules.fix import run as fix
    from lint_rules.source import OVERLAY

    run = fix.fix_in_passes([path], options, style=args.fix_style, writer=fix.into_overlay)
    _progress_done(options)
    sys.stdout.flush()
    sys.stdout.buffer.write(OVERLAY[os.path.realpath(path)])
    sys.stdout.buffer.flush()
    counts = report.statistics(u.diagnostic for u in run.unfixed) if args.statistics else ""
    sys.stderr.write("".join(f"{line}\n" for line in fix.report_lines(run)) + report.error_lines(run.errors) + counts)
    return 0 if args.exit_zero else fix.exit_status(run, diff=False)


def _report(args: argparse.Namespace, result: Result, run: Run, files: list[str]) -> int:
    """Print the findings and errors of an analysis in the chosen format; the exit status."""
    from lint_rules import report

    counts = report.statistics(result.diagnostics, result.coverage) if args.statistics else ""
    err = report.error_lines(result.errors)
    if args.format == "text":
        out, err = report.text(result, show_source=args.show_source)
        out += counts
        # Every run with torch installed reads some of it: said with --verbose (which named the
        # environment already); FWD005 names the environment where something could not be read.
        if result.installed_read and args.verbose and not args.quiet and run.environment is not None:
            err += (f"fwdlint: read {result.installed_read} installed file(s) of {run.environment.python} "
                    "to resolve names\n")
    elif args.format == "github":
        out = report.github(result) + counts
    elif args.format == "json":  # one JSON document on stdout: the statistics go to stderr
        out = report.as_json(result, _edits(args, result, run, files))
        err += counts
    else:
        from lint_rules import sarif

        out = sarif.as_sarif(result)
        err += counts
    failed = report.write(out, args.output_file, root=args.project_root)
    sys.stderr.write(err)
    if failed is not None:
        print(failed, file=sys.stderr)
        return 2
    if args.exit_zero:
        return 0
    if result.errors:
        return 2
    return 1 if result.diagnostics else 0


def _edits(args: argparse.Namespace, result: Result, run: Run, files: list[str]) -> dict:
    """With ``--fix-edits``, the edits ``--fix`` would make, by finding (``fix.edits.planned``)."""
    if not args.fix_edits:
        return {}
    from lint_rules.fix import edits

    return edits.planned(files, run, result.diagnostics, style=args.fix_style)


def _run_options(args: argparse.Namespace) -> Run | int:
    """The run the options and the configuration ask for, or an exit status after a one-line error."""
    from lint_rules import environment, settings
    from lint_rules.engine import AUTO_JOBS, Run
    from lint_rules.settings import Config

    keys = (*settings.LIST_KEYS, *settings.EXTEND_KEYS, "per-file-ignores", "forward-helpers", "from-record")
    given = {key: getattr(args, key.replace("-", "_")) for key in keys}
    try:
        options = settings.resolve({**given, "python": args.python}, args.paths, args.config, args.isolated)
    except settings.ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    for warning in options.warnings:
        print(warning, file=sys.stderr)
    try:
        env = _environment(args, options)
    except environment.NoInterpreter as exc:
        if options.python_source is None:
            print(f"fwdlint: error: {exc}", file=sys.stderr)
        else:  # the file and key, then the reason without the option name it does not come from
            print(f"{options.python_source}: {str(exc).replace(f'--python {options.python}: ', '', 1)}",
                  file=sys.stderr)
        return 2
    observed: tuple[run_record.Entry, ...] = ()
    if options.from_record:  # the record's reader is imported only to read one
        from lint_rules.run_record import RecordError, load

        try:
            observed = tuple(load(options.from_record))
        except RecordError as exc:  # a configured record: the file and key that name it first
            print(f"{options.from_record_source or 'fwdlint: error'}: {exc}", file=sys.stderr)
            return 2
    from lint_rules.progress import for_stderr

    return Run(progress=for_stderr(args.quiet), coverage=args.statistics,
               config=Config(module_bases=options.module_bases, mark_decorators=options.mark_decorators,
                             forward_helpers=options.forward_helpers, observed=observed,
                             record=options.from_record or ""),
               select=options.select, ignore=options.ignore, environment=env,
               jobs=AUTO_JOBS if args.jobs is None else args.jobs or _cpus(),
               project_root=args.project_root.resolve() if args.project_root else None, cache=not args.no_cache,
               # --cache-dir is the user's choice, anywhere (as ruff's); a configured one was checked
               cache_dir=args.cache_dir or (Path(options.cache_dir) if options.cache_dir else None),
               exclude=options.exclude, per_file_ignores=options.per_file_ignores,
               start=settings.start_directory(args.paths))


def _cpus() -> int:
    from lint_rules.workers import cpus

    return cpus()


def _environment(args: argparse.Namespace, options: settings.Options) -> environment.Environment:
    """The environment the run reads installed packages from (``environment.find``); its warnings,
    and with ``--verbose`` its one-line description, go to stderr. Only an interpreter named on the
    command line may be run, never one a configuration file names."""
    from lint_rules import environment, settings
    from lint_rules.layout import find_root

    start = settings.start_directory(args.paths)
    project = args.project_root.resolve() if args.project_root else find_root(start) or start
    configured = options.python_source  # "setup.cfg: error: [fwdlint] 'python-executable'", None: --python
    env = environment.find(options.python, source=configured.replace(": error: ", " ") if configured else "--python",
                           may_run=configured is None, project=project)
    for line in (*env.warnings, *([env.describe()] if args.verbose else [])):
        print(line, file=sys.stderr)
    return env


def _fix(args: argparse.Namespace, files: list[str], options: Run, walk_errors: list[tuple[str, str]]) -> int:
    from lint_rules.diagnostics import FileError
    from lint_rules.fix import run as fix

    if args.format not in ("text", "json"):
        print(f"fwdlint: error: --format {args.format} reports findings; with --fix or --diff use text or json",
              file=sys.stderr)
        return 2
    run = fix.plan(files, options, style=args.fix_style) if args.diff else fix.fix_in_passes(
        files, options, style=args.fix_style)
    _progress_done(options)
    run.errors = sorted([*run.errors, *(FileError(path, reason) for path, reason in walk_errors)])
    return _fix_report(args, run)


def _fix_report(args: argparse.Namespace, run: FixRun) -> int:
    """Print a fix run; the exit status. text: the diff to stdout, the rest to stderr; json: one
    document on stdout (``report.fix_json``), only error lines on stderr."""
    from lint_rules import report
    from lint_rules.fix import run as fix

    counts = report.statistics(u.diagnostic for u in run.unfixed) if args.statistics else ""
    err = report.error_lines(run.errors)
    if args.format == "json":
        out: str | bytes = report.fix_json(run, diff=args.diff)
    else:
        out = b"".join(fix.unified_diff(file) for file in run.changed) if args.diff else b""
        err = "".join(f"{line}\n" for line in fix.report_lines(run)) + err
        done = "would fix" if args.diff else "fixed"
        if (run.fixed or run.unfixed) and not args.quiet:
            err += (f"fwdlint: {done} {len(run.fixed)} finding(s) in {len({f.path for f in run.changed})} file(s), "
                    f"{len(run.unfixed)} not fixed\n")
    failed = report.write(out, args.output_file, root=args.project_root)
    sys.stderr.write(err + counts)
    if failed is not None:
        print(failed, file=sys.stderr)
        return 2
    return 0 if args.exit_zero else fix.exit_status(run, diff=args.diff)


if __name__ == "__main__":
    sys.exit(main())
