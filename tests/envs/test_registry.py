from __future__ import annotations

import pytest

from rlamd.envs import atari_games, parse_env_id


@pytest.mark.parametrize(
    ("name", "game", "sticky"),
    [
        ("breakout", "breakout", 0.0),
        ("BreakoutNoFrameskip-v4", "breakout", 0.0),
        ("ALE/Breakout-v5", "breakout", 0.25),
        ("space_invaders", "space_invaders", 0.0),
        ("SpaceInvadersNoFrameskip-v4", "space_invaders", 0.0),
        ("MsPacmanNoFrameskip-v4", "ms_pacman", 0.0),
        ("ALE/Pong-v5", "pong", 0.25),
    ],
)
def test_atari_spellings_reach_the_same_game(name, game, sticky):
    env_id = parse_env_id(name)
    assert (env_id.family, env_id.game, env_id.sticky) == ("atari", game, sticky)


def test_every_rom_has_a_short_name():
    games = atari_games()
    assert len(games) > 50
    for game in games:
        assert parse_env_id(game).game == game


@pytest.mark.parametrize("name", ["cartpole", "CartPole-v1", "CARTPOLE"])
def test_classic_names(name):
    assert parse_env_id(name).game == "CartPole-v1"


def test_unknown_name_lists_closest():
    with pytest.raises(ValueError, match="Closest valid names: breakout"):
        parse_env_id("breakuot")
    with pytest.raises(ValueError, match="space_invaders"):
        parse_env_id("space_invader")


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("import not_a_module_xyz\n", "ModuleNotFoundError: No module named 'not_a_module_xyz'"),
        ("def make(:\n    pass\n", "SyntaxError: invalid syntax"),
        ("raise RuntimeError('no licence')\n", "RuntimeError: no licence"),
    ],
)
def test_an_entry_point_whose_module_fails_to_import_names_the_module_and_its_error(
    tmp_path, monkeypatch, source, said
):
    """Regression: these were "Unknown environment" with Atari suggestions, or a traceback."""
    name = f"userenv_{abs(hash(source)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError) as info:
        parse_env_id(f"{name}:make")
    text = str(info.value)
    assert f"importing its module {name} failed ({said}" in text
    assert "Unknown environment" not in text and "breakout" not in text


def test_an_entry_point_naming_no_callable_offers_the_nearest():
    with pytest.raises(ValueError, match="Did you mean tests.envs.custom_envs:make_corridor"):
        parse_env_id("tests.envs.custom_envs:make_corridr")


@pytest.mark.parametrize("entry", ["__main__:<lambda>", "mymod:train.<locals>.make"])
def test_a_callable_of_another_process_says_how_to_load_it(entry):
    with pytest.raises(ValueError) as info:
        parse_env_id(entry)
    assert "rlamd.load(RUN, env=<the same callable>)" in str(info.value)
