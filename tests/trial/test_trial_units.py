"""Backend-free parts of the trial layer: reward reading, CTRF, commands, state links,
trial identity, the journal and the harness's own pytest."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from posttrain_arena.task_format.package import VerifierKind
from posttrain_arena.trial.harness import harness_bundle
from posttrain_arena.trial.journal import Journal
from posttrain_arena.trial.records import trial_id
from posttrain_arena.trial.result import Outcome, TrialResult
from posttrain_arena.trial.state import _drop_escaping_links, state_roots
from posttrain_arena.trial.verifier import build_command, read_ctrf, read_outcome, read_reward


@pytest.mark.parametrize(("name", "text", "reward"), [
    ("reward.txt", "1.0\n", 1.0), ("reward.txt", "0.25", 0.25),
    ("reward.json", '{"reward": 0}', 0.0), ("reward.json", '{"reward": 1}', 1.0),
])
def test_reward_files_are_read(tmp_path: Path, name: str, text: str, reward: float) -> None:
    (tmp_path / name).write_text(text)
    assert read_reward(tmp_path) == (reward, None)


@pytest.mark.parametrize(("name", "text", "why"), [
    ("reward.txt", "1.01", "outside"), ("reward.txt", "-0.5", "outside"),
    ("reward.txt", "nan", "outside"), ("reward.txt", "pass", "not a number"),
    ("reward.json", '{"reward": true}', "numeric"), ("reward.json", "[1]", "numeric"),
    ("reward.json", "{", "not a number"),
])
def test_bad_rewards_are_reasons(tmp_path: Path, name: str, text: str, why: str) -> None:
    (tmp_path / name).write_text(text)
    reward, reason = read_reward(tmp_path)
    assert reward is None and why in (reason or "")


def test_missing_and_linked_rewards(tmp_path: Path) -> None:
    assert read_reward(tmp_path)[0] is None
    (tmp_path / "elsewhere").write_text("1.0")
    os.symlink(tmp_path / "elsewhere", tmp_path / "reward.txt")
    reward, reason = read_reward(tmp_path)
    assert reward is None and "not a regular file" in (reason or "")


def _ctrf(logs: Path, *statuses: str) -> None:
    tests = [{"name": f"t{i}", "status": s} for i, s in enumerate(statuses)]
    (logs / "ctrf.json").write_text(json.dumps({"results": {"tests": tests}}))


def _pytest_reading(logs: Path, code: int) -> tuple[float | None, str]:
    reading = read_outcome(logs, exit_code=code, timed_out=False, timeout=5,
                           pytest_only=True)
    return reading.reward, reading.reason or ""


def test_pytest_verdicts_need_a_report_that_agrees(tmp_path: Path) -> None:
    for code in (0, 1):  # no per-test report: never a verdict from the exit status alone
        reward, why = _pytest_reading(tmp_path, code)
        assert reward is None and "no per-test report" in why
    _ctrf(tmp_path, "passed", "passed")
    assert _pytest_reading(tmp_path, 0) == (1.0, "")
    assert _pytest_reading(tmp_path, 1)[0] is None  # exit 1, nothing failed: disagree
    _ctrf(tmp_path, "passed", "failed")
    assert _pytest_reading(tmp_path, 1) == (0.0, "")
    reward, why = _pytest_reading(tmp_path, 0)  # exit 0 over a failure: disagree
    assert reward is None and "disagree" in why
    _ctrf(tmp_path, "skipped", "skipped")  # a skip never passes
    reward, why = _pytest_reading(tmp_path, 0)
    assert reward == 0.0 and "no test passed" in why
    _ctrf(tmp_path)
    assert _pytest_reading(tmp_path, 0)[0] == 0.0
    assert _pytest_reading(tmp_path, 5)[0] is None and _pytest_reading(tmp_path, 2)[0] is None
    timed = read_outcome(tmp_path, exit_code=0, timed_out=True, timeout=5, pytest_only=True)
    assert timed.reward is None and "5 s" in (timed.reason or "")


def test_ctrf_names_that_are_not_utf8_become_text(tmp_path: Path) -> None:
    name = "test_x[" + b"\xff".decode("utf-8", "surrogateescape") + "]"
    (tmp_path / "ctrf.json").write_text(json.dumps(
        {"results": {"tests": [{"name": name, "status": "failed"}]}}))
    (detail,) = read_ctrf(tmp_path / "ctrf.json")
    assert detail.name.encode("utf-8") and detail.status == "failed"


def test_ctrf_details(tmp_path: Path) -> None:
    report = {"results": {"tests": [{"name": "a", "status": "passed"},
                                    {"name": "b", "status": "failed", "message": "boom"},
                                    {"status": "passed"}]}}
    (tmp_path / "ctrf.json").write_text(json.dumps(report))
    details = read_ctrf(tmp_path / "ctrf.json")
    assert [(d.name, d.status, d.message) for d in details] == [
        ("a", "passed", None), ("b", "failed", "boom")]
    (tmp_path / "bad.json").write_text("{")
    assert read_ctrf(tmp_path / "bad.json") == []


def test_commands_never_go_through_a_login_shell() -> None:
    for kind in VerifierKind:
        for shared in (False, True):
            cmd = build_command(kind, verifier_dir="/v", harness_dir="/h", workdir="/root",
                                base_env=None if shared else {"PATH": "/opt/x:/usr/bin",
                                                              "PYTHONPATH": "/evil"},
                                isolate_site=shared)
            # the image's PYTHONPATH never; the read-only verifier directory instead
            assert "-lc" not in cmd.argv and cmd.env["PYTHONPATH"] == "/v"
            assert cmd.env["BENCHFLOW_SKIP_VERIFIER_DEPS"] == "1"
            if shared:  # pinned, then the harness's own bin/ (uvx, uv: trial/toolchain.py)
                assert cmd.env["PATH"] == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:" \
                    "/sbin:/bin:/h/bin"
    py = build_command(VerifierKind.VERIFIER_PY, verifier_dir="/v", harness_dir="/h",
                       workdir="/root", isolate_site=True)
    assert py.argv[:4] == ["python3", "-I", "-B", "-S"]


def test_state_roots_skip_system_paths() -> None:
    assert state_roots("/root", ["/var/lib/task", "/root/sub", "/etc/x", "/"]) == [
        "/root", "/var/lib/task"]
    assert state_roots("/", ["/srv"]) == ["/srv"]


def test_links_leaving_the_state_are_dropped(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    (root / "a").mkdir(parents=True)
    (root / "a" / "f").write_text("x")
    links = {"ans": "/verifier/expected", "up": "../etc/passwd", "d": "/root",
             "sneaky": "d/../etc/passwd", "ok": "a/f", "abs_ok": "/root/a",
             "chain": "ok", "other": "/var/lib/task/x"}
    for name, target in links.items():
        os.symlink(target, root / name)
    dropped = _drop_escaping_links({"/root": root}, ["/root", "/var/lib/task"])
    assert {d.split(" ->")[0] for d in dropped} == {"/root/ans", "/root/up", "/root/sneaky"}
    assert sorted(os.listdir(root)) == ["a", "abs_ok", "chain", "d", "ok", "other"]


def _result(tid: str, outcome: Outcome) -> TrialResult:
    return TrialResult(trial_id=tid, task_name="t", task_checksum="sha256:x",
                       domain="software-engineering", agent="empty", backend="local",
                       outcome=outcome, reward=0.0 if outcome is Outcome.SCORED else None)


def test_trial_identity() -> None:
    assert trial_id("sha256:a", "oracle", 0) == trial_id("sha256:a", "oracle", 0)
    assert len({trial_id("sha256:a", "oracle", 0), trial_id("sha256:b", "oracle", 0),
                trial_id("sha256:a", "empty", 0), trial_id("sha256:a", "oracle", 1)}) == 4


def test_journal_keeps_final_results_and_retries_infrastructure(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    journal.append(_result("a", Outcome.SCORED))
    journal.append(_result("b", Outcome.INFRA_ERROR))
    journal.append(_result("c", Outcome.AGENT_TIMEOUT))
    journal.append(_result("d", Outcome.BUILD_FAILED))
    reopened = Journal(tmp_path / "j.jsonl")
    assert reopened.done("a") is not None and reopened.done("c") is not None
    assert reopened.done("b") is None and reopened.done("d") is None
    assert reopened.scored("a") == reopened.done("a")
    assert reopened.latest("b") is not None and len(reopened) == 4
    reopened.append(_result("b", Outcome.SCORED))
    assert Journal(tmp_path / "j.jsonl").done("b") is not None


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="no system python3")
def test_harness_pytest_writes_ctrf_and_ignores_planted_conftest(tmp_path: Path) -> None:
    bundle = harness_bundle(tmp_path / "cache")
    vdir = tmp_path / "work" / "verifier"
    vdir.mkdir(parents=True)
    (vdir / "test_outputs.py").write_text("def test_a():\n    assert True\n\n"
                                          "def test_b():\n    assert False\n")
    (tmp_path / "work" / "conftest.py").write_text(
        "import pytest\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")
    ctrf = tmp_path / "out" / "ctrf.json"
    env = {"PATH": "/usr/bin:/bin", "ARENA_VERIFIER_DIR": str(vdir), "ARENA_PYFLAGS": "-S"}
    proc = subprocess.run(["sh", str(bundle / "pytest"), "--ctrf", str(ctrf),
                           str(vdir / "test_outputs.py")], env=env, cwd=tmp_path / "work",
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    statuses = {d.name.split("::")[-1]: d.status for d in read_ctrf(ctrf)}
    assert statuses == {"test_a": "passed", "test_b": "failed"}


def test_host_writes_replace_links_and_never_follow_them(tmp_path: Path) -> None:
    from posttrain_arena.trial.hostfiles import keep_regular_files, write_file

    outside = tmp_path / "outside.txt"
    outside.write_text("untouched\n")
    record = tmp_path / "record"
    record.mkdir()
    os.symlink(outside, record / "stdout.txt")
    os.symlink(outside, record / ".stdout.txt.tmp")  # the name an older writer used
    write_file(record / "stdout.txt", "verifier output\n")
    assert outside.read_text() == "untouched\n"
    assert not (record / "stdout.txt").is_symlink()
    assert (record / "stdout.txt").read_text() == "verifier output\n"
    # sandbox output: only top-level regular files are kept, links and dirs left out
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "reward.txt").write_text("1.0\n")
    os.symlink(outside, out / "ctrf.json")
    os.mkfifo(out / "fifo")
    left = keep_regular_files(out, record)
    assert sorted(left) == ["ctrf.json", "fifo", "sub"]
    assert (record / "reward.txt").read_text() == "1.0\n"
    assert not (record / "ctrf.json").exists()
    assert outside.read_text() == "untouched\n"


class _ProbeSession:
    """A session whose exec answers what a probe cut short (or a whole one) prints."""

    def __init__(self, result: object) -> None:
        self.result = result

    def exec(self, *args: object, **kwargs: object) -> object:
        return self.result


@pytest.mark.parametrize("cut", ["timeout", "crash", "no-end"])
def test_a_pristine_probe_cut_short_trusts_nothing(cut: str) -> None:
    from posttrain_arena.sandbox.base import ExecResult, SandboxError

    # The lines it printed name nothing inside the state root; what it never printed
    # (python3's sys.path, say) might have.
    partial = "prog\tbash\t/usr/bin/bash\n"
    whole = partial + "end\n"
    result = {"timeout": ExecResult(137, partial, "", timed_out=True),
              "crash": ExecResult(2, whole, ""),
              "no-end": ExecResult(0, partial, "")}[cut]
    with pytest.raises(SandboxError, match="did not finish"):
        _probe(result)
    # The whole probe's answer is believed: nothing inside the root, nothing refused.
    assert _probe(ExecResult(0, whole, "")) is None
    planted = ExecResult(0, "prog\tpython3\t/root/.venv/bin/python3\nend\n", "")
    assert "inside the state root" in (_probe(planted) or "")


def _probe(result: object, *, shell_verifier: bool = False) -> str | None:
    from posttrain_arena.sandbox.base import ImageRef
    from posttrain_arena.trial.pristine import probe_reason

    image = ImageRef(backend="local", tag="t", context_hash="h")
    return probe_reason(_ProbeSession(result), image, ["/root"], env={},  # type: ignore[arg-type]
                        cwd="/root", shell_verifier=shell_verifier)


def test_a_python_that_imports_from_its_cwd_is_refused_for_test_sh() -> None:
    """Python before 3.11 ignores PYTHONSAFEPATH: a test.sh that `cd`s into the workdir
    would import the agent's json.py; verifier.py and pytest run with -I and a script."""
    from posttrain_arena.sandbox.base import ExecResult

    old = ExecResult(0, "syspath\t-\t.\nsyspath\t-\t/usr/lib/python310.zip\nend\n", "")
    assert "current directory" in (_probe(old, shell_verifier=True) or "")
    assert _probe(old, shell_verifier=False) is None
