"""TD3 on Hopper-v5, 100k steps: SB3 against itself, rounding changed only.

``results/td3_hopper_shadow`` shows that SB3's TD3 with PyTorch's fused Adam (the same
formula, other rounding) parts from SB3's own run within a few hundred updates, as rlamd's
learner does when fed SB3's batches. This runs SB3's side of ``scripts/dqn_vs_sb3.py``
unchanged but for ``optimizer_kwargs={"fused": True}`` on the seeds of the stored races,
so each run is SB3 on the very seed whose outcome is on record, rounded otherwise:

    .venv/bin/python results/td3_hopper_100k_sb3_fused/sb3_fused.py SEED

It writes ``seedSEED/sb3/{evals,progress}.csv`` here.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "scripts"))

import dqn_vs_sb3  # noqa: E402


def main() -> None:
    seed = int(sys.argv[1])
    recipe = dqn_vs_sb3.race("td3", "Hopper-v5")
    kwargs = dict(recipe.sb3)
    kwargs["policy_kwargs"] = {**kwargs["policy_kwargs"], "optimizer_kwargs": {"fused": True}}
    dqn_vs_sb3.race = lambda algo, env: recipe._replace(sb3=kwargs)
    out = HERE / f"seed{seed}"
    dqn_vs_sb3._sb3_continuous("td3", "Hopper-v5", 100_000, seed, out / "sb3", 10_000, 5_000)


if __name__ == "__main__":
    main()
