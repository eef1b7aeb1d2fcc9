"""The package itself: version, generated bindings in step with the header, op table."""
import importlib.util
import os
import re

import aneforge as af

from conftest import ROOT


def test_version_matches_library_and_pyproject():
    text = open(os.path.join(ROOT, "pyproject.toml")).read()
    assert re.search(r'^version = "([^"]+)"', text, re.M).group(1) == af.__version__


def test_cdefs_generated_from_current_headers(tmp_path):
    spec = importlib.util.spec_from_file_location("gen", os.path.join(ROOT, "python", "gen_cdefs.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    fresh = gen.main(str(tmp_path / "c.py"))
    committed = open(os.path.join(ROOT, "python", "aneforge", "_cdefs.py")).read()
    assert fresh == committed, "python/aneforge/_cdefs.py is stale: run python3 python/gen_cdefs.py"


def test_every_header_function_is_in_the_library():
    from aneforge import _lib
    assert _lib.missing == []


def test_every_op_of_the_table_is_a_function_or_said_why_not():
    table = af.op_table()
    assert len(table) > 80
    for name in table:
        assert name in af.OPS or name in af.INTERNAL_OPS, name
        if name in af.OPS:
            assert callable(getattr(af, name)), name
            assert af.OPS[name].__doc__ and "(C: af_" in af.OPS[name].__doc__


def test_help_shows_docstrings():
    assert "Pools over the last two axes" in af.avg_pool.__doc__
    assert "avg_pool(x, kernel, stride=None, pad=None)" in af.avg_pool.__doc__
    import inspect
    assert str(inspect.signature(af.rope)) == "(x, offset=0, theta=10000.0)"
    assert af.Trainer.__doc__ and af.compile.__doc__ and af.backward.__doc__


def test_stub_file_lists_the_public_names():
    stub = open(os.path.join(ROOT, "python", "aneforge", "__init__.pyi")).read()
    for name in ("Graph", "Tensor", "compile", "backward", "Trainer", "UnrolledTrainer", "Model", "Error"):
        assert re.search(r"\b%s\b" % name, stub), name
    for name in af.ops():
        assert re.search(r"^def %s\(" % name, stub, re.M), "stub lacks op %s" % name


def test_stub_is_generated_from_the_current_op_table(tmp_path):
    spec = importlib.util.spec_from_file_location("genstubs", os.path.join(ROOT, "python", "gen_stubs.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    fresh = gen.main(str(tmp_path / "s.pyi"))
    assert fresh == open(os.path.join(ROOT, "python", "aneforge", "__init__.pyi")).read(), \
        "python/aneforge/__init__.pyi is stale: run python3 python/gen_stubs.py"
    compile(fresh, "__init__.pyi", "exec")  # valid Python syntax
