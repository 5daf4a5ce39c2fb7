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
