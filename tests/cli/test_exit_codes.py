"""Commands that tell the truth when things go wrong: bad arguments refused before anything heavy loads, an
unwritable run directory in one line, Ctrl-C that stops within seconds and names what exists, and `eval`
agreeing with `check` on a kernel that does not compile. Real subprocesses throughout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _kernelsage(*args: str, cwd: Path, python: tuple[str, ...] = (),
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *python, "-m", "kernelsage", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300, stdin=subprocess.DEVNULL,
                          env={**os.environ, "DATABASE_URL": "", "KERNELSAGE_HOME": str(cwd / "home"),
                               "KERNELSAGE_MODEL_API_KEY": "sk-test", **(env or {})})


def _one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    return errors[0]


BAD_ARGUMENTS = {
    "unknown policy": (("run", "--model", "openai:m", "--policy", "bogus"), "unknown memory policies ['bogus']"),
    "unknown policy in compare": (("compare", "--model", "openai:m", "--policies", "sage,nope"),
                                  "unknown memory policies ['nope']"),
    "missing suite": (("run", "--model", "openai:m", "--suite", "no/such/suite"), "no/such/suite: no such file"),
    "bad model spec": (("run", "--model", "gpt-4o"), "model 'gpt-4o' is not 'provider:model'"),
    "missing report path": (("report", "no/such/run"), "no/such/run: no such run directory"),
}


@pytest.mark.parametrize("case", list(BAD_ARGUMENTS))
def test_bad_arguments_are_refused_before_torch_the_suite_or_the_database_load(case: str, tmp_path: Path) -> None:
    args, expected = BAD_ARGUMENTS[case]
    # -X importtime lists every module the command imported before it stopped: a count that does not depend
    # on how busy the machine is (wall times do: 50-80 s on a busy one before, about 1 s on an idle one now).
    result = _kernelsage(*args, cwd=tmp_path, python=("-X", "importtime"))
    assert result.returncode == 2, result.stderr[-3000:]
    error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and expected in error[0], result.stderr[-3000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    heavy = {"torch", "kernelsage.evals.experiment", "kernelsage.tasks.loaders", "kernelsage.memory_backend.store",
             "kernelsage.evals.report", "matplotlib"} & imported
    assert not heavy, f"{case}: loaded {sorted(heavy)} before refusing"
    assert not (tmp_path / "runs").exists() and not (tmp_path / "home").exists()  # nothing written, no database


def test_a_run_directory_that_cannot_be_written_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file where the run directory's parent should be")
    result = _kernelsage("run", "--model", "openai:m", "--run-dir", "taken/r1", cwd=tmp_path)
    assert result.returncode == 2
    error = _one_error_line(result)
    assert "taken/r1" in error and "not a directory" in error and "--run-dir" in error
    assert len(result.stderr.strip().splitlines()) == 1


def test_run_metadata_that_cannot_be_written_is_one_configuration_error(tmp_path: Path) -> None:
    from kernelsage.errors import ConfigurationError
    from kernelsage.evals.records import RunMetadata, write_run_metadata

    (tmp_path / "taken").write_text("")
    with pytest.raises(ConfigurationError, match=r"cannot write .*taken/r1/run.json.*writable --run-dir"):
        write_run_metadata(tmp_path / "taken" / "r1", RunMetadata(run_id="r1"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_run_directory_is_refused_in_one_line(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = _kernelsage("run", "--model", "openai:m", "--run-dir", "locked/r1", cwd=tmp_path)
    finally:
        locked.chmod(0o700)
    assert result.returncode == 2 and "not writable" in _one_error_line(result)


def test_eval_agrees_with_check_on_a_kernel_that_does_not_compile(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()
    source = tmp_path / "kernels" / "l1_relu.cpp"
    source.write_text("int ks_kernel(")
    checked = _kernelsage("check", "--task", "l1_relu", "--source", str(source), cwd=tmp_path)
    evaluated = _kernelsage("eval", str(tmp_path / "kernels"), cwd=tmp_path)
    assert checked.returncode == 1, checked.stderr[-2000:]
    assert evaluated.returncode == checked.returncode, evaluated.stdout[-2000:] + evaluated.stderr[-2000:]
    assert "1 of 1 kernels are not correct (l1_relu)" in _one_error_line(evaluated)
    assert "0 of 0" not in evaluated.stdout and "no correct kernel to time" in evaluated.stdout


INTERRUPTED_STREAM = textwrap.dedent("""
    import sys, threading, time
    from pathlib import Path
    from kernelsage.cli.interrupt import interruptible, interrupted_message

    def unwinding_that_waits():  # like a model call in flight in a worker thread the executor joins
        worker = threading.Thread(target=time.sleep, args=(60,))
        worker.start()
        try:
            # "ready" inside the try: a Ctrl-C right after it must meet the waiting unwinding, not skip it
            # (printed before the try, a signal landing in between escaped the join in a CI run).
            print("ready", flush=True)
            time.sleep(60)
        finally:
            worker.join()

    run_dir = Path(sys.argv[1])
    with interruptible(lambda: interrupted_message(run_dir, "r1", "run"), grace_s=1.0):
        unwinding_that_waits()
""")


def test_ctrl_c_stops_within_seconds_even_when_the_unwinding_waits(tmp_path: Path) -> None:
    process = subprocess.Popen([sys.executable, "-c", INTERRUPTED_STREAM, str(tmp_path / "runs" / "r1")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    signalled = time.monotonic()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    took = time.monotonic() - signalled
    assert process.returncode == 130 and took < 10, (took, stderr)
    assert stderr.count("interrupted") == 1 and "Traceback" not in stderr, stderr
    # Early in a run nothing exists yet: the line says so instead of naming a directory to look in.
    assert "nothing was written" in stderr and "does not exist" in stderr and "kept in" not in stderr


def test_the_interrupted_line_names_only_what_exists(tmp_path: Path) -> None:
    from kernelsage.cli.interrupt import interrupted_message

    run_dir = tmp_path / "r1"
    assert "nothing was written" in interrupted_message(run_dir, "r1", "run")
    run_dir.mkdir()
    (run_dir / "run.json").write_text("{}")
    started = interrupted_message(run_dir, "r1", "compare")
    assert "before any episode finished" in started and "kernelsage compare --run-id r1" in started
    (run_dir / "sage.jsonl").write_text('{"a": 1}\n{"a": 2}\n')
    assert interrupted_message(run_dir, "r1", "run").startswith(f"interrupted: 2 finished episodes are kept in {run_dir}")


def test_ctrl_c_stops_the_demo_within_seconds_and_says_how_to_start_again(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | {"KERNELSAGE_HOME": str(tmp_path / "home"),
                                                                        "COLUMNS": "400"}
    process = subprocess.Popen([sys.executable, "-m", "kernelsage", "demo", "--out", str(tmp_path / "demo")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    assert process.stdout is not None
    assert "replayed from a recording" in process.stdout.readline()  # the demo has started its stream
    signalled = time.monotonic()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    took = time.monotonic() - signalled
    assert process.returncode == 130 and took < 20, (took, stderr)
    assert "interrupted: the demo stopped" in stderr and "Traceback" not in stderr, stderr
