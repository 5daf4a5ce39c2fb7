"""A user's own files: a --config in another encoding or a folder, evaluate --video onto a
file (issue 34, case 9). Each is one line naming the file, before any work."""

from __future__ import annotations

import pytest

from rlamd.train import main

TOML = '[train]\nenv = "cartpole"\nsteps = 64\nrun_name = "é"\n'


def test_a_config_with_a_utf8_byte_order_mark_reads(tmp_path, capsys):
    """Regression: "Invalid statement at line 1"."""
    path = tmp_path / "c.toml"
    path.write_bytes(b"\xef\xbb\xbf" + TOML.encode())
    logdir = tmp_path / "runs"
    args = ["--config", str(path), "--algo", "ppo", "--logdir", str(logdir), "--no-tensorboard"]
    assert main([*args, "--set", "ppo.num_steps=16", "--num-envs", "2"]) == 0
    assert (logdir / "é" / "checkpoint.pt").exists()


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (TOML.encode("latin-1"), "is not UTF-8: byte 0xe9 on line 4"),
        (TOML.encode("utf-16"), "is UTF-16 (little-endian) text"),
        (TOML.encode("utf-16-be").join([b"\xfe\xff", b""]), "is UTF-16 (big-endian) text"),
    ],
)
def test_a_config_in_another_encoding_is_named_with_its_encoding(tmp_path, capsys, data, said):
    path = tmp_path / "c.toml"
    path.write_bytes(data)
    assert main(["--config", str(path), "--logdir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--config {path} {said}" in err
    assert "accepted: a UTF-8 file" in err and not (tmp_path / "runs").exists()


def test_a_config_that_is_a_folder_points_to_its_config_toml(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.toml").write_text(TOML)
    assert main(["--config", str(tmp_path / "run"), "--logdir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "is a folder; accepted: a TOML file" in err
    assert f"--config {tmp_path / 'run' / 'config.toml'}" in err


def test_evaluate_video_onto_a_file_is_refused_before_playing(tmp_path, capsys):
    """Regression: a FileExistsError traceback after the first episode."""
    from rlamd.evaluate import main as evaluate

    logdir = tmp_path / "runs"
    args = ["cartpole", "--algo", "ppo", "--steps", "32", "--num-envs", "2", "--run-name", "r"]
    assert (
        main([*args, "--logdir", str(logdir), "--no-tensorboard", "--set", "ppo.num_steps=16"]) == 0
    )
    target = tmp_path / "clip.gif"
    target.write_bytes(b"GIF89a")
    capsys.readouterr()
    assert evaluate([str(logdir / "r"), "--video", str(target), "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert f"--video {target}: that is a file; accepted: a folder" in err
    assert target.read_bytes() == b"GIF89a"


def test_evaluate_threads_sets_torchs_threads_and_refuses_zero(tmp_path, capsys):
    import torch

    from rlamd.evaluate import main as evaluate

    logdir = tmp_path / "runs"
    args = ["cartpole", "--algo", "ppo", "--steps", "32", "--num-envs", "2", "--run-name", "r"]
    assert (
        main([*args, "--logdir", str(logdir), "--no-tensorboard", "--set", "ppo.num_steps=16"]) == 0
    )
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert evaluate([str(logdir / "r"), "--episodes", "1", "--threads", "1"]) == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    capsys.readouterr()
    assert evaluate([str(logdir / "r"), "--threads", "0"]) == 2
    assert "error: --threads 0; accepted: an integer >= 1" in capsys.readouterr().err
