# SPDX-License-Identifier: MIT
"""The installed package: self-contained (the library linked in, its
symbols kept inside), typed, documented."""
import ast
import os
import subprocess

import envlog
from envlog import _envlog


def test_the_extension_needs_no_build_tree():
    so = _envlog.__file__
    dyn = subprocess.run(["readelf", "-d", so], capture_output=True, text=True, check=True).stdout
    needed = [line.split("[", 1)[1].rstrip("]") for line in dyn.splitlines() if "(NEEDED)" in line]
    assert needed and not any("envlog" in n for n in needed)
    assert "RPATH" not in dyn and "RUNPATH" not in dyn
    syms = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True,
                          check=True).stdout.split()
    assert "PyInit__envlog" in syms
    assert not [s for s in syms if s.startswith("envlog_")]
    assert envlog.__version__ == _envlog.version()[0]


def test_stub_and_docstrings_cover_the_api():
    here = os.path.dirname(envlog.__file__)
    with open(os.path.join(here, "__init__.pyi"), encoding="utf-8") as f:
        stub = ast.parse(f.read())
    names = {n.name for n in stub.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    for node in stub.body:
        if isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
    for node in stub.body:
        if isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    assert set(envlog.__all__) - names == set()
    assert os.path.isfile(os.path.join(here, "py.typed"))
    undocumented = [n for n in envlog.__all__
                    if callable(getattr(envlog, n)) and not getattr(envlog, n).__doc__]
    assert undocumented == []
    for cls in (envlog.Env, envlog.Session):
        for name, member in vars(cls).items():
            if callable(member) and not name.startswith("_"):
                assert member.__doc__, f"{cls.__name__}.{name}"


def test_errors_map_every_code():
    from envlog import _errors
    for code in range(2, 16):
        cls = _errors.BY_CODE[code]
        assert issubclass(cls, envlog.Error)
        assert cls.__name__ in envlog.__all__
        assert _envlog.strerror(code)
    assert issubclass(envlog.IOError, OSError)
    assert issubclass(envlog.InvalidArgumentError, ValueError)
