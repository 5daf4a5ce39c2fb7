"""scripts/gpu_checks.sh runs on a lent GPU a few minutes at a time, so what can fail
before it gets there is checked here: the Python it writes out must parse, must not take
a standard module's name (a "profile.py" there broke torch's import of cProfile), and
must import only what rlamd still has."""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = (ROOT / "scripts" / "gpu_checks.sh").read_text()
WRITTEN = dict(re.findall(r"cat > \"\$out/(\w+)\.py\" <<'PY'\n(.*?)\nPY\n", SCRIPT, re.S))


def test_the_script_writes_its_python_steps_and_runs_each():
    assert {"trace_learn", "memory", "sac_graph"} <= set(WRITTEN)
    for name in WRITTEN:
        assert f'$py "$out/{name}.py"' in SCRIPT, f"{name}.py is written but never run"


def test_no_written_script_takes_a_standard_module_name():
    # the script's folder comes first on sys.path, so "profile.py" would replace the
    # standard "profile" that cProfile (imported by torch._dynamo) imports
    assert not set(WRITTEN) & sys.stdlib_module_names


def test_the_written_scripts_parse_and_import_what_rlamd_has():
    for name, source in WRITTEN.items():
        tree = ast.parse(source, filename=f"{name}.py")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rlamd"):
                module = importlib.import_module(node.module)
                missing = [a.name for a in node.names if not hasattr(module, a.name)]
                assert not missing, f"{name}.py imports {missing} from {node.module}"
