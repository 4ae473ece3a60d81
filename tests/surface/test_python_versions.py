"""fastrl runs on Python 3.10 too: tomllib (3.11+) falls back to tomli, its PyPI original.

This machine runs 3.11, so the 3.10 branch is exercised in a subprocess told it is 3.10 and
given no tomllib; the sources are parsed with the 3.10 grammar; and pyproject's
requires-python and its tomli marker are checked to agree.
"""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from fastrl.config import tomllib

pytestmark = pytest.mark.engine  # the engine tier: runs, processes, benchmarks

ROOT = Path(__file__).resolve().parents[2]

_AS_IF_310 = """
import sys
sys.version_info = (3, 10, 13, "final", 0)
sys.modules["tomllib"] = None  # importing it would raise: only tomli can parse here
import fastrl.config as config
assert config.tomllib.__name__ == "tomli", config.tomllib
path = sys.argv[1]
c = config.load_config(path, ["engine.envs=6"])
assert (c.engine.envs, c.env.id, c.run.seed) == (6, "CartPole-v1", 7), c
print("ok")
"""


def test_config_reads_toml_with_tomli_on_python_310(tmp_path):
    pytest.importorskip("tomli")
    path = tmp_path / "run.toml"
    path.write_text("[env]\nid = 'CartPole-v1'\n[run]\nseed = 7\n")
    out = subprocess.run([sys.executable, "-c", _AS_IF_310, str(path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_every_source_parses_with_the_python_310_grammar():
    files = [p for folder in ("fastrl", "csrc_free_kernels", "tests") for p in (ROOT / folder).rglob("*.py")]
    assert len(files) > 50
    for path in files:
        ast.parse(path.read_text(encoding="utf-8"), str(path), feature_version=(3, 10))


def test_pyproject_promises_310_and_brings_tomli_there():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.10"
    tomli = [d for d in project["dependencies"] if d.startswith("tomli")]
    assert tomli and tomli[0].replace(" ", "").endswith(";python_version<'3.11'")
