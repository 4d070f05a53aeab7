"""The `torchmend verify` command line a fix's report gives, from the run's Budget (vcs/body.verify_command)."""

from __future__ import annotations

from torchmend.values import Budget
from torchmend.vcs.body import verify_command


def test_the_budget_gives_steps_and_timeout() -> None:
    cmd = verify_command("train.py", ("--lr", "0.1"), budget=Budget(steps=20, timeout=90.0), seed=3, repeat=2)
    assert (
        cmd
        == "torchmend verify train.py --patch torchmend.patch --steps 20 --timeout 90.0 --repeat 2 --seed 3 -- --lr 0.1"
    )


def test_no_budget_names_neither() -> None:
    assert verify_command("train.py") == "torchmend verify train.py --patch torchmend.patch"
    assert verify_command("train.py", budget=Budget(timeout=5.0)) == (
        "torchmend verify train.py --patch torchmend.patch --timeout 5.0"
    )


def test_a_torchrun_launch_goes_after_the_options() -> None:
    cmd = verify_command("train.py", budget=Budget(steps=4), launcher=("--nproc-per-node", "2"))
    assert cmd == "torchmend verify --patch torchmend.patch --steps 4 -- torchrun --nproc-per-node 2 train.py"
