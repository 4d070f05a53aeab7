"""Bad input, budgets and run fidelity, through the real CLI and real child processes."""

from __future__ import annotations

import subprocess
import sys
import time

from conftest import SCAN_FIXTURES, scan_json, torchmend

LOOP = """
import torch
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
step = torch.compile(lambda x: model(x).sum(), backend={backend!r})
for i in range({n}):
    step(torch.randn(2, 4)).backward()
    opt.step()
    opt.zero_grad()
"""


def test_help_does_not_import_torch():
    code = (
        "import sys, runpy; sys.argv=['torchmend','--help']\n"
        "try: runpy.run_module('torchmend', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "assert 'torch' not in sys.modules, 'the CLI imported torch'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "scan" in proc.stdout


def test_usage_error_exit_2():
    r = torchmend("scan", "x.py", "--steps", "0")
    assert r.returncode == 2


def test_missing_script_exit_3(tmp_path):
    r = torchmend("scan", str(tmp_path / "nope.py"))
    assert r.returncode == 3
    assert "script not found" in r.stderr


def test_directory_is_not_a_script_exit_3(tmp_path):
    assert torchmend("scan", str(tmp_path)).returncode == 3


def test_syntax_error_exit_4_without_running(write_script):
    script = write_script("bad.py", "import torch\ndef f(:\n    pass\n")
    t0 = time.monotonic()
    r = torchmend("scan", str(script))
    assert r.returncode == 4
    assert "syntax error" in r.stderr and "bad.py:2" in r.stderr
    assert time.monotonic() - t0 < 10  # caught in the parent: torch was never started


def test_crash_before_compile_exit_4_with_traceback_tail(write_script):
    script = write_script("crash.py", "import torch\nraise RuntimeError('dataset missing: /data/train')\n")
    r = torchmend("scan", str(script))
    assert r.returncode == 4
    assert "failed before anything was compiled" in r.stderr
    assert "RuntimeError: dataset missing: /data/train" in r.stderr
    assert 'crash.py", line 2' in r.stderr
    assert "torchmend/profiler/child.py" not in r.stderr  # our frames are not the user's


def test_sys_exit_nonzero_before_compile_exit_4(write_script):
    script = write_script("bye.py", "import sys\nsys.exit(3)\n")
    assert torchmend("scan", str(script)).returncode == 4


def test_never_compiles_exit_5(write_script):
    script = write_script("plain.py", "import torch\nprint(torch.ones(2).sum())\n")
    r = torchmend("scan", str(script))
    assert r.returncode == 5
    assert "never reached a torch.compile" in r.stderr


def test_hang_with_timeout_exit_5(write_script):
    script = write_script("hang.py", "import time\nwhile True:\n    time.sleep(1)\n")
    t0 = time.monotonic()
    r = torchmend("scan", str(script), "--timeout", "3")
    assert r.returncode == 5
    assert "--timeout 3.0 ended it first" in r.stderr
    assert time.monotonic() - t0 < 30


def test_timeout_after_compiling_reports_what_was_seen(write_script):
    script = write_script("slow.py", LOOP.format(backend="aot_eager", n=3) + "import time\ntime.sleep(600)\n")
    # 40 s: on a loaded 2-core machine the import and the first compile alone took more than 15 s
    r = torchmend("scan", str(script), "--timeout", "40", "--format", "json")
    assert r.returncode == 0, r.stderr
    s = r.json["summary"]
    assert s["ended_by"] == "timeout" and s["frames_compiled"] >= 1 and s["steps"] == 3


def test_steps_budget_ends_the_run(write_script):
    script = write_script("long.py", LOOP.format(backend="aot_eager", n=10_000))
    r = torchmend("scan", str(script), "--steps", "5", "--format", "json", "--timeout", "120")
    assert r.returncode == 0, r.stderr
    s = r.json["summary"]
    assert s["ended_by"] == "steps" and s["steps"] == 5


def test_crash_after_compile_exit_8_with_partial_report(write_script):
    script = write_script("late.py", LOOP.format(backend="aot_eager", n=2) + "raise ValueError('eval set empty')\n")
    r = torchmend("scan", str(script), "--format", "json")
    assert r.returncode == 8
    assert r.json["summary"]["frames_compiled"] >= 1
    assert "ValueError: eval set empty" in r.stderr


def test_fail_on_findings_exit_6_only_with_findings_to_fix():
    several = SCAN_FIXTURES / "several" / "train.py"
    clean = SCAN_FIXTURES / "clean" / "train.py"
    assert scan_json(several, "--fail-on-findings").returncode == 6
    assert scan_json(clean, "--fail-on-findings").returncode == 0


def test_backend_override_replaces_the_scripts_backend(write_script):
    script = write_script("odd.py", LOOP.format(backend="no_such_backend", n=2))
    assert torchmend("scan", str(script), "--format", "json").returncode == 4  # the script's own backend fails
    r = torchmend("scan", str(script), "--backend", "aot_eager", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert r.json["backend"] == "aot_eager"


def test_script_sees_argv_path_cwd_and_main_as_plain_python(tmp_path, write_script):
    (tmp_path / "helper.py").write_text("VALUE = 42\n")
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    script = write_script(
        "fidelity.py",
        f"""
import os, sys
import helper  # importable because the script's directory comes first on sys.path
assert __name__ == "__main__", __name__
assert sys.argv == [{str(tmp_path / "fidelity.py")!r}, "--lr", "0.1", "pos"], sys.argv
assert sys.path[0] == {str(tmp_path)!r}, sys.path[0]
# the run works in a copy of its working folder (profiler/sandbox.py): same name, same files, not the folder itself
assert os.path.basename(os.getcwd()) == "elsewhere" and os.getcwd() != {str(cwd)!r}, os.getcwd()
assert helper.VALUE == 42
"""
        + LOOP.format(backend="aot_eager", n=1),
    )
    r = torchmend("scan", str(script), "--format", "json", "--", "--lr", "0.1", "pos", cwd=cwd)
    assert r.returncode == 0, r.stderr


def test_table_output_groups_by_file_and_summarises():
    r = scan_json(SCAN_FIXTURES / "two_file" / "train.py")  # json run shares the cost; table run below
    assert r.returncode == 0
    t = torchmend("scan", str(SCAN_FIXTURES / "two_file" / "train.py"), "--backend", "aot_eager")
    assert t.returncode == 0, t.stderr
    assert "fixtures/scan/two_file/model.py" in t.stdout
    assert "TM104" in t.stdout and "TM205" in t.stdout
    assert "frames compiled" in t.stdout and "ended by the script finished" in t.stdout


def test_set_logs_in_the_script_does_not_blind_the_collector(write_script):
    script = write_script(
        "logs.py",
        "import torch\ntorch._logging.set_logs(recompiles=True)\n"
        + """
@torch.compile(backend="aot_eager")
def f(x, scale):
    return x * scale
for s in [1.0, 2.0, 3.0]:
    f(torch.ones(2), s)
""",
    )
    r = torchmend("scan", str(script), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert [f["rule"] for f in r.json["findings"]] == ["TM202"]


GAN = """
import torch
gen, disc = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
opt_g = torch.optim.SGD(gen.parameters(), lr=0.1)
opt_d = torch.optim.SGD(disc.parameters(), lr=0.1)
d_loss = torch.compile(lambda x: disc(x).sum(), backend="aot_eager")
for i in range(10_000):
    d_loss(gen(torch.randn(2, 4)).detach()).backward()
    opt_d.step()
    opt_d.zero_grad()
    (-d_loss(gen(torch.randn(2, 4)))).backward()
    opt_g.step()
    opt_g.zero_grad()
"""


def test_steps_of_two_optimizers_are_said_in_iterations(write_script):
    """--steps counts every optimizer's step(): a GAN's 12 steps are 6 iterations, and the summary says so
    (issue 41)."""
    script = write_script("gan.py", GAN)
    r = torchmend("scan", str(script), "--steps", "12", "--timeout", "120")
    assert r.returncode == 0, r.stderr
    assert "12 optimizer steps = 6 iterations of 2 optimizers" in " ".join(r.stdout.split()), r.stdout
