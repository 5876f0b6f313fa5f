"""``fwdlint --fix`` / ``--diff``, decorator style: the safety gates (verification, atomic writes,
permission bits), exit statuses and ``-j`` determinism. The hand-written pairs of every rule are
``test_fix_pairs.py``'s."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
from fixture_cases import FIXTURES, ROOT, run_cli

from lint_rules.fix import run as fix
from lint_rules.engine import Run, analyse
from lint_rules.fix import isolated
from lint_rules.fix import verify as fix_verify
from lint_rules.fix.verify import FixRefused, verify
from lint_rules.rules.fwd001_unmarked_entry import fix_decorator

PAIRS = FIXTURES / "fwd001" / "fix"
ONE_FILE = sorted(case.name for case in PAIRS.iterdir() if (case / "before.py").is_file())
BAD = b"import torch.nn as nn\n\nclass M(nn.Module):\n    def gen(self, x):\n        return self(x)\n"
BAD_FIXED = (b"import torch.nn as nn\nfrom runtime_shim import forward_entry\n\nclass M(nn.Module):\n"
             b"    @forward_entry\n    def gen(self, x):\n        return self(x)\n")


def _fix(*paths: Path, jobs: int = 1) -> fix.FixRun:
    run = fix.plan([str(p) for p in paths], Run(jobs=jobs, cache=False))  # the directory holds only what --fix wrote
    fix.write(run)
    return run


def _fwd001(path: Path) -> list[str]:
    return [d.symbol for d in analyse([str(path)], Run()).diagnostics if d.code == "FWD001"]


def test_crlf_bom_pairs_are_stored_byte_exact() -> None:
    assert len(ONE_FILE) >= 20
    assert b"\r\n" in (PAIRS / "crlf" / "before.py").read_bytes()
    assert (PAIRS / "bom" / "before.py").read_bytes().startswith(b"\xef\xbb\xbf")
    assert b"\t" in (PAIRS / "tabs_trailing_whitespace" / "before.py").read_bytes()


def test_diff_writes_nothing_and_exits_1(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_bytes(BAD)
    proc = run_cli(tmp_path, "--diff", "m.py")
    assert proc.returncode == 1
    assert (tmp_path / "m.py").read_bytes() == BAD
    assert proc.stdout.splitlines()[:2] == ["--- a/m.py", "+++ b/m.py"]
    assert "+from runtime_shim import forward_entry" in proc.stdout.splitlines()
    assert "+    @forward_entry" in proc.stdout.splitlines()
    assert "would fix 1 finding(s) in 1 file(s), 0 not fixed" in proc.stderr


def test_diff_applies_with_patch(tmp_path: Path) -> None:
    patch = shutil.which("patch") or shutil.which("git")
    if patch is None:
        pytest.skip("neither patch nor git")
    (tmp_path / "m.py").write_bytes(BAD)
    diff = run_cli(tmp_path, "--diff", "m.py").stdout
    (tmp_path / "fix.diff").write_text(diff)
    import subprocess

    cmd = [patch, "-p1", "-i", "fix.diff"] if patch.endswith("patch") else [patch, "apply", "fix.diff"]
    subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True, timeout=60)
    assert (tmp_path / "m.py").read_bytes() == BAD_FIXED


def test_fix_cli_exit_statuses(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_bytes(BAD)
    (tmp_path / "clean.py").write_text("x = 1\n")
    proc = run_cli(tmp_path, "--fix", ".")
    assert (proc.returncode, proc.stdout) == (0, "")
    assert "fixed 1 finding(s) in 1 file(s), 0 not fixed" in proc.stderr
    assert (tmp_path / "m.py").read_bytes() == BAD_FIXED
    again = run_cli(tmp_path, "--fix", ".")
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    assert run_cli(tmp_path, ".").returncode == 0
    assert run_cli(tmp_path, "--diff", ".").returncode == 0
    # no files at all (pre-commit with nothing staged)
    assert run_cli(tmp_path, "--fix").returncode == 0
    # --fix and --diff together is a usage error
    assert run_cli(tmp_path, "--fix", "--diff", ".").returncode == 2


def test_unparsable_file_is_an_error_and_others_are_fixed(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_bytes(BAD)
    (tmp_path / "broken.py").write_text("class M(nn.Module):\n    def f(self:\n")
    proc = run_cli(tmp_path, "--fix", ".")
    assert proc.returncode == 2
    assert "broken.py: error: syntax error" in proc.stderr
    assert (tmp_path / "m.py").read_bytes() == BAD_FIXED


def test_refused_fix_leaves_the_file_untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "m.py"
    target.write_bytes(BAD)

    def refuse(old: bytes, new: bytes, may_change: object, path: str) -> None:
        raise FixRefused("the fixed source does not compile: test")

    monkeypatch.setattr(fix_verify, "verify", refuse)
    monkeypatch.setattr(isolated, "IN_PROCESS", True)  # the patched gate is this process's
    run = _fix(target)
    assert target.read_bytes() == BAD
    assert [e.message for e in run.errors] == ["fix not applied: the fixed source does not compile: test"]
    assert [u.reason for u in run.unfixed] == ["fix refused: the fixed source does not compile: test"]
    assert fix.exit_status(run, diff=False) == 2
    assert fix.report_lines(run) == [
        f"{target}:4:9: FWD001 not fixed: fix refused: the fixed source does not compile: test"]


@pytest.mark.parametrize("old,new,may_change,message", [
    (b"a = 1\nb = 2\n", b"a = 1\nb = 3\n", {1}, "change existing line 2"),
    (b"a = 1\nb = 2\nc = 3\n", b"a = 1\nc = 3\n", {1}, "change existing line 2"),  # a line deleted
    (b"a = 1\r\nb = 2\r\n", b"a = 1\nb = 2\n", set(), "change existing line 1"),
    (b"\xef\xbb\xbfa = 1\n", b"a = 1\n", set(), "byte order mark"),
    (b"a = 1\n", b"a = 1\n@x\n", set(), "does not compile"),
    (b"# coding: latin-1\na = 1\n", b"a = 1\n# coding: latin-1\na = 1\n", set(), "encoding"),
])
def test_verify_refuses(old: bytes, new: bytes, may_change: set[int], message: str) -> None:
    with pytest.raises(FixRefused, match=message):
        verify(old, new, may_change, "x.py")


def test_verify_accepts_new_lines_and_the_declared_changes() -> None:
    verify(b"class A:\n    def f(self): pass\n", b"class A:\n    @x\n    def f(self): pass\n", set(), "x.py")
    verify(b"from m import a\nb = 2\n", b"from m import a, x\nb = 2\n", {1}, "x.py")


def test_write_is_atomic_and_keeps_mode(tmp_path: Path) -> None:
    target = tmp_path / "m.py"
    target.write_bytes(BAD)
    target.chmod(0o754)
    _fix(target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o754
    assert target.read_bytes() == BAD_FIXED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]  # no temporary file left


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="changing owners needs root")
def test_owner_and_group_are_kept(tmp_path: Path) -> None:
    target = tmp_path / "m.py"
    target.write_bytes(BAD)
    os.chown(target, 4321, 4322)
    _fix(target)
    assert target.read_bytes() == BAD_FIXED
    assert (target.stat().st_uid, target.stat().st_gid) == (4321, 4322)


def test_a_file_of_another_user_is_refused_not_taken_over(nobody) -> None:
    """A non-root user who may write the directory must not end up owning someone else's file."""
    outer = nobody.workdir()  # reachable by nobody: pytest's tmp_path (and maybe the checkout) is not
    project = outer / "shared"
    project.mkdir()
    project.chmod(0o777)
    target = project / "m.py"
    target.write_bytes(BAD)
    target.chmod(0o666)
    os.chown(target, 4321, 4321)
    try:
        proc = nobody.run(["-m", "lint_rules.cli", "--no-cache", "--fix", "m.py"], cwd=project)
        assert proc.returncode == 2, proc.stderr
        assert target.read_bytes() == BAD and target.stat().st_uid == 4321
        assert "belongs to uid 4321" in proc.stderr and "Traceback" not in proc.stderr
        assert sorted(p.name for p in project.iterdir()) == ["m.py"]
    finally:
        shutil.rmtree(outer)


def test_a_read_only_file_is_refused_for_a_user_who_may_not_write_it(nobody) -> None:
    """A 0444 file in a directory its owner may write: ruff (``check --fix``, ``format``) and black
    refuse it, Permission denied, because their write opens the file; fwdlint's rename needs only the
    directory, so it must refuse by itself (issue 36, item 10)."""
    outer = nobody.workdir()
    project = outer / "mine"
    project.mkdir()
    target = project / "m.py"
    target.write_bytes(BAD)
    target.chmod(0o444)
    os.chown(project, 65534, os.getgid())  # the fixture changes the user only: the group stays ours
    os.chown(target, 65534, os.getgid())
    try:
        proc = nobody.run(["-m", "lint_rules.cli", "--no-cache", "--fix", "m.py"], cwd=project)
        assert proc.returncode == 2, proc.stderr
        assert target.read_bytes() == BAD and stat.S_IMODE(target.stat().st_mode) == 0o444
        assert "m.py: error: not written: m.py is read-only for this user (mode 0444)" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
        assert sorted(p.name for p in project.iterdir()) == ["m.py"]
    finally:
        shutil.rmtree(outer)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="root may write a 0444 file")
def test_a_read_only_file_is_fixed_by_root_and_stays_read_only(tmp_path: Path) -> None:
    """root may write a 0444 file, and ruff and black running as root rewrite it: so does fwdlint,
    keeping the mode."""
    target = tmp_path / "m.py"
    target.write_bytes(BAD)
    target.chmod(0o444)
    run = _fix(target)
    assert not run.errors and target.read_bytes() == BAD_FIXED
    assert stat.S_IMODE(target.stat().st_mode) == 0o444


def test_a_hard_linked_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "m.py"
    target.write_bytes(BAD)
    os.link(target, tmp_path / "other.py")
    run = _fix(target)
    assert target.read_bytes() == BAD and (tmp_path / "other.py").read_bytes() == BAD
    assert len(run.errors) == 1 and "2 hard links" in run.errors[0].message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py", "other.py"]


def test_symlink_target_is_fixed_and_link_kept(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_bytes(BAD)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    _fix(link)
    assert link.is_symlink() and real.read_bytes() == BAD_FIXED


def test_file_changed_on_disk_is_not_overwritten(tmp_path: Path) -> None:
    target = tmp_path / "m.py"
    target.write_bytes(BAD)
    run = fix.plan([str(target)], Run())
    target.write_bytes(BAD + b"# edited meanwhile\n")
    fix.write(run)
    assert target.read_bytes() == BAD + b"# edited meanwhile\n"
    assert run.errors and "changed while it was being fixed" in run.errors[0].message
    assert fix.exit_status(run, diff=False) == 2


def test_parallel_fix_is_byte_identical(tmp_path: Path) -> None:
    trees = []
    for jobs in (1, 2):
        tree = tmp_path / f"j{jobs}"
        tree.mkdir()
        for name in ONE_FILE:
            shutil.copyfile(PAIRS / name / "before.py", tree / f"{name}.py")
        proc = run_cli(tree, "--fix", "--no-cache", "-j", str(jobs), ".")
        assert proc.returncode == 0, proc.stderr
        trees.append({p.name: p.read_bytes() for p in sorted(tree.iterdir())})
    assert trees[0] == trees[1]
    assert trees[0] == {f"{n}.py": (PAIRS / n / "after.py").read_bytes() for n in ONE_FILE}


def test_noqa_lines_are_never_changed(tmp_path: Path) -> None:
    target = tmp_path / "m.py"
    shutil.copyfile(PAIRS / "noqa" / "before.py", target)
    before = [line for line in target.read_text().splitlines() if "noqa" in line]
    _fix(target)
    after = target.read_text().splitlines()
    for line in before:
        assert line in after
        above = after[after.index(line) - 1]
        assert "forward_entry" not in above or "E501" in line


def test_fix_select_excluding_fwd001_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_bytes(BAD)
    proc = run_cli(tmp_path, "--fix", "--ignore", "FWD001", "m.py")
    assert proc.returncode == 0
    assert (tmp_path / "m.py").read_bytes() == BAD


def test_fixer_only_parses_files_with_findings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "m.py").write_bytes(BAD)
    for index in range(3):
        (tmp_path / f"clean{index}.py").write_text("import torch.nn as nn\n\nclass C(nn.Module):\n    pass\n")
    seen: list[str] = []
    original = fix_decorator.fix_source
    monkeypatch.setattr(fix_decorator, "fix_source",
                        lambda path, old, d: seen.append(os.path.basename(path)) or original(path, old, d))
    monkeypatch.setattr(isolated, "IN_PROCESS", True)  # the patched fixer is this process's
    fix.plan([str(p) for p in sorted(tmp_path.iterdir())], Run())
    assert seen == ["m.py"]


def test_generator_methods_are_not_decorated(tmp_path: Path) -> None:
    """@forward_entry rejects generators when the class is defined: decorating one would leave a
    file that no longer imports. The finding is reported as not fixed, with the runtime's words."""
    source = (FIXTURES / "fwd001" / "generator_methods.py").read_text()
    (tmp_path / "gen.py").write_text(source)
    proc = run_cli(tmp_path, "--fix", "gen.py")
    assert proc.returncode == 1
    assert (tmp_path / "gen.py").read_text() == source
    assert proc.stderr.splitlines()[0] == (
        "gen.py:12:9: FWD001 not fixed: @forward_entry cannot mark generator Streamer.stream: a generator runs "
        "after the wrapper's forward has returned, so it cannot be routed; return a list instead")


def test_async_methods_are_not_decorated(tmp_path: Path) -> None:
    """A coroutine runs when awaited, after the wrapper's forward has returned: @forward_entry
    rejects ``async def`` like a generator, so the fix leaves it, saying why; the sync method next
    to it is decorated."""
    source = ("import torch.nn as nn\n\n\nclass Model(nn.Module):\n    async def agenerate(self, x):\n"
              "        return self(x)\n\n    def generate(self, x):\n        return self(x)\n")
    (tmp_path / "m.py").write_text(source)
    proc = run_cli(tmp_path, "--fix", "m.py")
    assert proc.returncode == 1
    text = (tmp_path / "m.py").read_text()
    assert "    @forward_entry\n    def generate" in text and "@forward_entry\n    async def" not in text
    assert proc.stderr.splitlines()[0] == (
        "m.py:5:15: FWD001 not fixed: @forward_entry cannot mark async method Model.agenerate: a coroutine runs "
        "when it is awaited, after the wrapper's forward has returned, so it cannot be routed; mark a plain "
        "method that does the computation and call it from the coroutine")


@pytest.mark.parametrize("encoding,prefix", [("latin-1", b"# -*- coding: latin-1 -*-\n"), ("utf-8", b"\xef\xbb\xbf")])
def test_diff_applies_to_non_ascii_context(tmp_path: Path, encoding: str, prefix: bytes) -> None:
    """The diff is made of the file's own bytes: a latin-1 file with a cookie, or a UTF-8 file with
    a BOM on line 1, with non-ASCII text in the hunk's context, still patches with git and patch,
    giving exactly what --fix writes."""
    import subprocess

    source = prefix + ("# Modèle à deux étages\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n"
                       "    \"\"\"Réseau.\"\"\"\n\n    def gen(self, x):\n        return self(x)  # é\n").encode(encoding)
    (tmp_path / "fixed").mkdir()
    (tmp_path / "fixed" / "m.py").write_bytes(source)
    assert run_cli(tmp_path / "fixed", "--fix", "m.py").returncode == 0
    expected = (tmp_path / "fixed" / "m.py").read_bytes()
    assert expected.startswith(prefix) and "Modèle" in expected.decode(encoding)
    tools = [cmd for cmd in (["git", "apply"], ["patch", "-p1", "-i"]) if shutil.which(cmd[0])]
    if not tools:
        pytest.skip("neither git nor patch")
    for tool in tools:
        work = tmp_path / tool[0]
        work.mkdir()
        (work / "m.py").write_bytes(source)
        proc = subprocess.run([sys.executable, "-m", "lint_rules.cli", "--diff", "m.py"], cwd=work,
                              capture_output=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 1 and proc.stdout.startswith(b"--- a/m.py"), proc.stderr
        (work / "fix.diff").write_bytes(proc.stdout)
        subprocess.run([*tool, "fix.diff"], cwd=work, check=True, capture_output=True, timeout=60)
        assert (work / "m.py").read_bytes() == expected, tool


# -- the gate every fix passes, and the passes ---------------------------------------------------

def _fake_fix(monkeypatch: pytest.MonkeyPatch, edit) -> None:
    """FWD001's decorator fix replaced by one that claims every finding and applies ``edit``."""
    def fix_source(path: str, old: bytes, diagnostics) -> fix_verify.FileFix:
        return fix_verify.FileFix(path, old, edit(old), fixed=list(diagnostics))

    monkeypatch.setattr(fix_decorator, "fix_source", fix_source)
    monkeypatch.setattr(isolated, "IN_PROCESS", True)  # the replaced fixer is this process's


@pytest.mark.parametrize("edit,reason", [
    (lambda old: old + b"# touched\n", "FWD001 on M.gen is still reported after the fix"),
    (lambda old: old.replace(b"    def gen", b"    @forward_entry\n    def gen").replace(
        b"import torch.nn as nn\n", b"import torch.nn as nn\nfrom runtime_shim import forward_entry\n")
        + b"\n    def other(self, x):\n        return self(x)\n", "the fix would add a finding: FWD001 on M.other"),
])
def test_a_fix_is_linted_again_before_it_is_written(edit, reason: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a rule's fix claims, the fixed text is linted again: a claimed finding still there
    or a new one refuses the fix, and the file stays as it was."""
    target = tmp_path / "m.py"
    target.write_bytes(BAD)
    _fake_fix(monkeypatch, edit)
    run = _fix(target)
    assert target.read_bytes() == BAD
    assert [e.message for e in run.errors] == [f"fix not applied: {reason}"]
    assert [u.reason for u in run.unfixed] == [f"fix refused: {reason}"]


def test_later_passes_analyse_only_the_changed_files_and_their_importers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file with findings of two fixable rules (FWD001, FWD301) takes two passes; the second
    analyses that file and the file that imports it (its findings may change), not the unrelated one."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "a.py").write_text(
        "import types\n\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n    def gen(self, x):\n"
        "        return self(x)\n\n\ndef fast(self, x):\n    return x\n\n\ndef speed_up(m):\n"
        "    m.forward = types.MethodType(fast, m)\n")
    (tmp_path / "b.py").write_text("from a import M\n\n\nclass Sub(M):\n    def forward(self, x):\n        return x\n")
    (tmp_path / "c.py").write_text("x = 1\n")
    analysed: list[list[str]] = []
    real = fix.analyse
    monkeypatch.setattr(fix, "analyse", lambda paths, run: analysed.append(sorted(paths)) or real(paths, run))
    monkeypatch.chdir(tmp_path)
    run = fix.fix_in_passes(["a.py", "b.py", "c.py"], Run())
    assert analysed == [["a.py", "b.py", "c.py"], ["a.py", "b.py"]]
    assert sorted(d.code for d in run.fixed) == ["FWD001", "FWD301"] and run.unfixed == [] and run.errors == []
    text = (tmp_path / "a.py").read_text()
    assert "    @forward_entry\n    def gen" in text and "    patch_forward(m, fast)\n" in text
    assert analyse(["a.py", "b.py", "c.py"], Run()).diagnostics == []
