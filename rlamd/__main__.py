"""``rlamd SUBCOMMAND ...``: the console script; each sub-command is a ``python -m`` module."""

from __future__ import annotations

import importlib
import sys

_COMMANDS = {
    "train": ("rlamd.train", "train an agent on an Atari game, a classic task or your own env"),
    "evaluate": ("rlamd.evaluate", "real game scores of a trained run"),
    "doctor": ("rlamd.doctor.__main__", "why the GPU is not usable, and the fix"),
    "bench": ("rlamd.bench.__main__", "speed benchmarks, with installed peers side by side"),
    "sweep": ("rlamd.sweep.__main__", "seeds and searches on Ray Tune, with IQM tables"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    available = {k: v for k, v in _COMMANDS.items() if importlib.util.find_spec(v[0])}
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in available:
        lines = "\n".join(
            f"  {k:<10} {h}  (python -m {m.removesuffix('.__main__')})"
            for k, (m, h) in available.items()
        )
        print(f"usage: rlamd COMMAND [ARGS...]\n\ncommands:\n{lines}")
        if argv and argv[0] not in ("-h", "--help"):
            print(f"\nrlamd: unknown command '{argv[0]}'", file=sys.stderr)
            return 2
        return 0
    module = importlib.import_module(available[argv[0]][0])
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
