"""Type stubs and docstrings: every submodule has a generated .pyi that names exactly
its public names (and each class's public methods), the package stub names every public
name of dir(aneforge), the committed stubs are current, and help() has text for all."""
import ast
import importlib.util
import inspect
import os
import pydoc

import pytest

import aneforge as af

from conftest import ROOT

PKG = os.path.join(ROOT, "python", "aneforge")


def gen():
    spec = importlib.util.spec_from_file_location("genstubs_sub", os.path.join(ROOT, "python", "gen_stubs.py"))
    g = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(g)
    return g


G = gen()


def stub_names(path):
    """Top-level names a stub declares, and {class: its member names}."""
    tree = ast.parse(open(path).read())
    names, members = set(), {}
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            names.add(n.name)
            if isinstance(n, ast.ClassDef):
                members[n.name] = {m.name for m in n.body if isinstance(m, ast.FunctionDef)} | \
                                  {m.target.id for m in n.body if isinstance(m, ast.AnnAssign)}
        elif isinstance(n, ast.AnnAssign):
            names.add(n.target.id)
        elif isinstance(n, ast.Assign):
            names.update(t.id for t in n.targets if isinstance(t, ast.Name))
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update(a.asname for a in n.names if a.asname)
    return names, members


def test_every_submodule_is_stubbed():
    mods = {n for n in dir(af) if inspect.ismodule(getattr(af, n)) and not n.startswith("_")
            and getattr(af, n).__name__.startswith("aneforge.")}
    internal = {"errors", "graph", "model"}  # their names are re-exported by the package stub
    assert mods - internal <= set(G.SUBMODULES), "submodules without a stub: %s" % (mods - internal - set(G.SUBMODULES))
    for m in ("coreml", "data", "hf", "llama", "mil", "sim", "text", "train"):
        assert m in G.SUBMODULES


@pytest.mark.parametrize("name", G.SUBMODULES)
def test_submodule_stub_names_match_the_module(name):
    mod = getattr(af, name)
    names, members = stub_names(os.path.join(PKG, name + ".pyi"))
    public = set(G.public_names(mod))
    assert public, name
    assert public - names == set(), "%s.pyi lacks %s" % (name, sorted(public - names))
    assert names - public == set(), "%s.pyi names what the module lacks: %s" % (name, sorted(names - public))
    for cls, ms in members.items():
        real = getattr(mod, cls)
        want = {k for k, v in vars(real).items() if not k.startswith("_") and
                (inspect.isfunction(v) or isinstance(v, (property, staticmethod, classmethod)))}
        assert want <= ms, "%s.pyi: class %s lacks %s" % (name, cls, sorted(want - ms))
        for m in ms:
            assert hasattr(real, m) or m in getattr(real, "__slots__", ()) or m in _init_attrs(real), (name, cls, m)


def _init_attrs(cls):
    try:
        src = inspect.getsource(cls.__init__)
    except (OSError, TypeError):
        return set()
    import re
    return set(re.findall(r"self\.([A-Za-z]\w*)", src))


def test_submodule_stubs_are_current():
    fresh = G.submodule_stubs("-")
    for name, src in fresh.items():
        committed = open(os.path.join(PKG, name + ".pyi")).read()
        assert src == committed, "python/aneforge/%s.pyi is stale: run python/gen_stubs.py" % name
        compile(src, name + ".pyi", "exec")


def test_package_stub_names_every_public_name():
    names, _ = stub_names(os.path.join(PKG, "__init__.pyi"))
    public = {n for n in dir(af) if not n.startswith("_")}
    missing = sorted(n for n in public - names if not inspect.ismodule(getattr(af, n)) or n in G.SUBMODULES)
    assert missing == [], "__init__.pyi lacks %s" % missing


@pytest.mark.parametrize("name", G.SUBMODULES + ["aneforge"])
def test_help_has_a_docstring_for_every_public_name(name):
    mod = af if name == "aneforge" else getattr(af, name)
    assert mod.__doc__ and mod.__doc__.strip()
    text = pydoc.render_doc(mod, renderer=pydoc.plaintext)
    assert mod.__doc__.strip().split("\n")[0] in text
    names = G.public_names(mod) if mod is not af else [n for n in dir(af) if not n.startswith("_")]
    bare = []
    for n in names:
        o = getattr(mod, n)
        if inspect.ismodule(o) or not callable(o):
            continue
        if not (inspect.getdoc(o) or "").strip():
            bare.append(n)
        if inspect.isclass(o) and o.__module__.startswith("aneforge"):
            for k, v in vars(o).items():
                if not k.startswith("_") and (inspect.isfunction(v) or isinstance(v, (property, staticmethod, classmethod))):
                    f = v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
                    if not (f.__doc__ or "").strip():
                        bare.append("%s.%s" % (n, k))
    assert bare == [], "%s: no docstring for %s" % (name, bare)
