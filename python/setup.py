# SPDX-License-Identifier: MIT
"""Builds envlog's Python package: the extension envlog._envlog over the C
library, linked statically so an installed package needs no build tree.

The library comes from the envlog tree this directory sits in: the archive
named by $ENVLOG_STATIC (what `make python` passes: the tree's own build),
or else one this build makes with the tree's Makefile, in its own build
directory.  Either way the compile flags are the Makefile's.
"""
import os
import re
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HEADER = os.path.join(ROOT, "include", "envlog.h")
if not os.path.isfile(HEADER):
    sys.exit(f"envlog: {HEADER} is missing: build the package from the envlog tree "
             "(python/ inside it)")


def library_version():
    with open(HEADER, encoding="utf-8") as f:
        m = re.search(r'#define ENVLOG_VERSION_STRING "([^"]+)"', f.read())
    if not m:
        sys.exit(f"envlog: no ENVLOG_VERSION_STRING in {HEADER}")
    return m.group(1)


class BuildWithLibrary(build_ext):
    """Makes sure libenvlog.a exists before the extension links against it."""

    def run(self):
        lib = os.environ.get("ENVLOG_STATIC")
        if lib:
            lib = os.path.abspath(lib)
            if not os.path.isfile(lib):
                sys.exit(f"envlog: ENVLOG_STATIC={lib}: no such file")
        else:
            out = os.path.abspath(os.path.join(self.build_temp, "envlog-lib"))
            lib = os.path.join(out, "libenvlog.a")
            cmd = ["make", "-C", ROOT, "--no-print-directory", f"B={out}", lib]
            print("envlog: building the library:", " ".join(cmd), flush=True)
            if subprocess.call(cmd) != 0:
                sys.exit("envlog: building libenvlog.a failed (see above)")
        libs = os.environ.get("ENVLOG_LIBS")
        if not libs:
            libs = subprocess.run(["make", "-s", "-C", ROOT, "--no-print-directory",
                                   "python-ldlibs"], capture_output=True, text=True,
                                  check=False).stdout.strip() or DEFAULT_LIBS
        for ext in self.extensions:
            ext.extra_objects = [lib]
            ext.extra_link_args = ext.extra_link_args + libs.split()
            ext.depends = ext.depends + [lib]
        super().run()


# What the library links with: the Makefile's LDLIBS_ALL ($ENVLOG_LIBS, or
# asked of make), these where neither answers.
DEFAULT_LIBS = "-lcbor -lxxhash -lzstd -lpthread -ldl -lm"

WARN = ["-std=c11", "-Wall", "-Wextra", "-Wshadow", "-Wstrict-prototypes",
        "-Wmissing-prototypes", "-Wvla", "-Wformat=2", "-Wno-missing-field-initializers",
        "-Wno-cast-function-type"]

ext = Extension(
    "envlog._envlog",
    sources=[os.path.join("src", f) for f in
             ("module.c", "convert.c", "env.c", "py_state.c", "py_session.c", "py_record.c",
              "py_tuner.c")],
    depends=[os.path.join("src", "envlog_py.h"), HEADER,
             os.path.join(ROOT, "include", "envlog_cuda.h"),
             os.path.join(ROOT, "include", "envlog_remote.h")],
    include_dirs=[os.path.join(ROOT, "include")],
    define_macros=[("_GNU_SOURCE", "1")],
    extra_compile_args=WARN + ["-fvisibility=hidden"],
    # The library's symbols stay inside the module: another copy of libenvlog
    # in the same process is never interposed.
    extra_link_args=["-Wl,--exclude-libs,ALL"],
)

# Where the build goes: $ENVLOG_PY_BUILD (`make python` names one under its
# build directory), else build/ here.
BUILD_BASE = os.environ.get("ENVLOG_PY_BUILD") or os.path.join(HERE, "build")
os.makedirs(BUILD_BASE, exist_ok=True)

setup(
    name="envlog",
    version=library_version(),
    description="Read, record and autotune into envlog environments from Python",
    license="MIT",
    python_requires=">=3.9",
    packages=["envlog"],
    package_data={"envlog": ["py.typed", "*.pyi"]},
    ext_modules=[ext],
    cmdclass={"build_ext": BuildWithLibrary},
    zip_safe=False,
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
)
