"""The command lines' errors: one line and exit code 2; with TIERGYM_TRACEBACK=1 the traceback
before the line, so that a bug of the project's own that raises a ValueError can be told from
bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from envs.errors import TRACEBACK_VAR, fail, one_line, report_error


def _raised(message: str) -> ValueError:
    try:
        raise ValueError(message)
    except ValueError as exc:
        return exc


def test_an_error_is_one_line_and_exit_code_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TRACEBACK_VAR, raising=False)
    assert report_error(_raised("--episodes 0:\n  expected a value >= 1")) == 2
    assert capsys.readouterr().err == "error: --episodes 0:; expected a value >= 1\n"
    assert report_error(_raised("bad"), "deploy.py") == 2
    assert capsys.readouterr().err == "deploy.py: error: bad\n"
    assert one_line(ValueError()) == "ValueError"  # a message-less error still says something


def test_fail_stops_with_the_same_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command line's own check (no exception to show): the line report_error prints, exit
    code 2, and no traceback even with TIERGYM_TRACEBACK set (there is none to show)."""
    monkeypatch.setenv(TRACEBACK_VAR, "1")
    with pytest.raises(SystemExit) as exc:
        fail("run/: not a run folder\n  (no config.yml)", "imitation_policy.py")
    assert exc.value.code == 2
    assert (
        capsys.readouterr().err
        == "imitation_policy.py: error: run/: not a run folder; (no config.yml)\n"
    )


@pytest.mark.parametrize(
    ("value", "shown"), [("1", True), ("yes", True), ("0", False), ("", False)]
)
def test_tiergym_traceback_adds_the_traceback_before_the_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, value: str, shown: bool
) -> None:
    monkeypatch.setenv(TRACEBACK_VAR, value)
    assert report_error(_raised("boom")) == 2
    err = capsys.readouterr().err
    assert err.endswith("error: boom\n")
    assert ("Traceback (most recent call last)" in err and "_raised" in err) == shown
    assert (err.count("\n") > 1) == shown


def test_evaluate_shows_where_a_value_error_came_from_when_asked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The same bad policy: one line, then with the variable the frames that raised it."""
    import evaluate

    args = ["--scenarios", "kv-store", "--policies", "dram-first,bestest",
            "--output", str(tmp_path / "out"), "--no-progress"]  # fmt: skip
    monkeypatch.delenv(TRACEBACK_VAR, raising=False)
    assert evaluate.main(args) == 2
    plain = capsys.readouterr().err
    assert plain.count("\n") == 1 and plain.startswith("error: ") and "bestest" in plain
    monkeypatch.setenv(TRACEBACK_VAR, "1")
    assert evaluate.main(args) == 2
    traced = capsys.readouterr().err
    assert "Traceback (most recent call last)" in traced and "evaluate.py" in traced
    assert traced.endswith(plain)
    assert not (tmp_path / "out" / "results.json").exists()
