"""README's Python block and examples/python/ keep working (small runs)."""
import os
import re
import subprocess
import sys

from conftest import ROOT
from synth import write_mnist

EX = os.path.join(ROOT, "examples", "python")


def run(args, **kw):
    return subprocess.run([sys.executable] + args, capture_output=True, text=True, timeout=600, **kw)


def test_readme_python_block_prints_what_readme_shows(tmp_path):
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    m = re.search(r"^## Python\n.*?```python\n(.*?)```\n\nprints `([^`]*)`", text, re.S | re.M)
    assert m, "README.md: the Python section's example and its output line"
    (tmp_path / "ex.py").write_text(m.group(1))
    r = run([str(tmp_path / "ex.py")])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == m.group(2)
    assert len(m.group(1).strip().split("\n")) <= 16


def test_mnist_example_on_a_small_set(tmp_path):
    root = write_mnist(str(tmp_path), ntrain=640, ntest=200)
    r = run([os.path.join(EX, "mnist.py"), "--data", root, "--epochs", "1"])
    assert r.returncode == 0, r.stderr
    acc = float(re.search(r"final test accuracy ([0-9.]+)", r.stdout).group(1))
    assert acc > 0.5
    r = run([os.path.join(EX, "mnist.py"), "--data", root, "--epochs", "1", "--target", "ane-sim:m1", "--resident"])
    assert r.returncode == 0, r.stderr
    assert "plan resident" in r.stdout


def test_unrolled_example_on_synthetic_data():
    r = run([os.path.join(EX, "unrolled_ane_sim.py"), "--data", "/nonexistent", "--K", "2"])
    assert r.returncode == 0, r.stderr
    assert "2 steps per dispatch" in r.stdout
    assert float(re.search(r"train accuracy ([0-9.]+)", r.stdout).group(1)) > 0.6


def test_llama_finetune_example(tmp_path):
    (tmp_path / "t.txt").write_text("The cat sat on the mat. " * 30)
    r = run([os.path.join(EX, "llama_finetune.py"), "--text", str(tmp_path / "t.txt"), "--steps", "20", "--seq", "16",
             "--batch", "4", "--out", str(tmp_path / "o.bin"), "--sample", "10"])
    assert r.returncode == 0, r.stderr
    assert os.path.getsize(tmp_path / "o.bin") > 100000 and "saved" in r.stdout
