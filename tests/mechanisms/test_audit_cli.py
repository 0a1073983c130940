"""The ``privmarket audit`` command (api/cli_mechanism.py) on a tiny CSV."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli_mechanism import app


def test_audit_command_prints_a_json_report(tmp_path: Path) -> None:
    csv = tmp_path / "toy.csv"
    csv.write_text("x,y,cost\n1.0,1,0.1\n-1.0,-1,0.6\n")
    out = tmp_path / "report.json"
    res = CliRunner().invoke(
        app,
        [
            "--csv", str(csv), "--cost-low", "0", "--cost-high", "1",
            "--mu", "1", "--sigma", "0.1", "--k", "2", "--budget", "100",
            "--n-sellers", "0", "--workers", "1", "--out", str(out),
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    assert rep["budget_ok"] is True
    assert rep["ir_violations"] == []
    assert rep["ic_ok"] is True
    assert rep["budget_total"] > 0


@pytest.mark.parametrize("body", ["x,y\n1,1\n", "x,y,cost\n1.0,1,2.0\n-1.0,-1,0.6\n"])
def test_audit_command_rejects_bad_csv(tmp_path: Path, body: str) -> None:
    csv = tmp_path / "bad.csv"
    csv.write_text(body)
    res = CliRunner().invoke(app, ["--csv", str(csv), "--cost-high", "1"])
    assert res.exit_code != 0


def test_audit_command_reports_monotonicity(tmp_path: Path) -> None:
    csv = tmp_path / "toy.csv"
    csv.write_text("x,y,cost\n1.0,1,0.1\n-1.0,-1,0.6\n0.5,1,0.3\n")
    out = tmp_path / "report.json"
    args = [
        "--csv", str(csv), "--cost-low", "0", "--cost-high", "1",
        "--mu", "1", "--sigma", "0.1", "--k", "2", "--n-sellers", "2",
        "--workers", "1", "--mono-points", "20", "--certify", "auto",
        "--out", str(out),
    ]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    mono = json.loads(out.read_text())["monotonicity"]
    assert mono["n_points"] == 20
    assert len(mono["sellers"]) == 2
    assert mono["certified"] is True
    assert mono["base_status"] == "optimal"
    assert mono["n_violations"] == 0
    assert mono["ok"] is True
    bad = CliRunner().invoke(app, [*args[:-2], "--certify", "nope"])
    assert bad.exit_code != 0
