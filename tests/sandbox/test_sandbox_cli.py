"""`arena sandbox doctor|reap` and `arena images bootstrap` through the real CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from posttrain_arena.cli.main import app

runner = CliRunner()


def test_doctor_json_reports_every_backend() -> None:
    result = runner.invoke(app, ["sandbox", "doctor", "--json"])
    report = json.loads(result.stdout)
    assert {b["name"] for b in report["backends"]} == {"docker", "local"}
    works = [b["name"] for b in report["backends"] if b["works"]]
    assert result.exit_code == (0 if works else 1)
    assert report["auto"] == (works[0] if works else None)
    for b in report["backends"]:
        assert b["detail"]  # what was found, or the fix


@pytest.mark.bwrap
def test_reap_json_runs_on_an_idle_machine() -> None:
    result = runner.invoke(app, ["sandbox", "reap", "--json"])
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)) >= {"containers", "local_sessions", "cgroups"}


@pytest.mark.docker
def test_bootstrap_skips_present_images() -> None:
    from posttrain_arena.sandbox.images import BASE_IMAGES
    from posttrain_arena.sandbox.registry import get_backend

    client = get_backend("docker").client  # type: ignore[attr-defined]
    if not all(client.images.list(name=i.name) for i in BASE_IMAGES):
        pytest.skip("base images not bootstrapped yet (scripts/services.sh does it)")
    result = runner.invoke(app, ["images", "bootstrap", "--json"])
    assert result.exit_code == 0, result.output
    assert [r["action"] for r in json.loads(result.stdout)] == ["skipped"] * len(BASE_IMAGES)
