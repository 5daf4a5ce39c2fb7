"""``python -m rlamd.doctor --explain-file LOG``: every known error in a whole log, first one
first, with the line that matched."""

from __future__ import annotations

import io
import json

from rlamd.doctor.__main__ import main
from rlamd.doctor.known_errors import explain_log

from .known_error_messages import MESSAGES

NOISE = "Epoch [3/10], Accuracy: 41.20%\n"


def _log() -> str:
    """A training log: noise, a harmless warning, then the real failure and its aftermath."""
    return (
        NOISE
        + MESSAGES["amdgpu_ids"][0][1]
        + "\n"
        + NOISE * 3
        + MESSAGES["miopen_kdb_missing"][0][1]
        + "\n"
        + MESSAGES["tensile_missing"][0][1]
        + "\n"
        + "Aborted (core dumped)\n"
    )


def test_every_error_in_the_log_is_found_in_order_with_its_line():
    found = explain_log(_log())
    assert [(m.error.key, m.line_no) for m in found] == [
        ("amdgpu_ids", 2),
        ("miopen_kdb_missing", 6),
        ("tensile_missing", 7),
    ]
    assert found[2].line.startswith("rocBLAS error: Cannot read")


def test_a_message_wrapped_over_lines_is_found_at_its_first_line():
    wrapped = NOISE + "Memory access fault by GPU node-1 (Agent handle: 0x55d1)\non address 0x7f.\n"
    wrapped += "Reason: Page not present or supervisor privilege.\n"
    found = explain_log(wrapped)
    assert [(m.error.key, m.line_no) for m in found] == [("memory_access_fault", 2)]


def test_every_real_message_in_one_log_is_found():
    log = "\n".join(NOISE + text for found in MESSAGES.values() for _, text in found)
    keys = {m.error.key for m in explain_log(log)}
    assert keys >= set(MESSAGES)
    assert explain_log(NOISE * 50) == []


def test_explain_file_prints_each_with_its_line(tmp_path, capsys):
    log = tmp_path / "train.log"
    log.write_text(_log())
    assert main(["--explain-file", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"\n3 known error(s) in {log}, first one first:\n" in out
    assert out.index("line 2: amdgpu.ids") < out.index("line 7: rocBLAS error")
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0" in out and "seen in: https://github.com/" in out


def test_explain_file_json_and_stdin(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(_log()))
    assert main(["--explain-file", "-", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["file"] == "-"
    assert [(m["key"], m["line_no"]) for m in out["matches"]][-1] == ("tensile_missing", 7)
    assert all(m["fixes"] and m["source"] for m in out["matches"])


def test_explain_file_without_a_known_error_or_a_file(tmp_path, capsys):
    log = tmp_path / "ok.log"
    log.write_text(NOISE * 5)
    assert main(["--explain-file", str(log)]) == 1
    assert f"No known error matches anything in {log}" in capsys.readouterr().out
    assert main(["--explain-file", str(tmp_path / "missing.log")]) == 2
    err = capsys.readouterr().err
    assert "missing.log" in err and "No such file" in err and "give a log file or -" in err
