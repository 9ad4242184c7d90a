# SPDX-License-Identifier: MIT
"""Shared fixtures: a fresh environment per test, and the `envlog` command
of the same build (ENVLOG_BIN, which `make check-python` sets) to hold the
package's answers against."""
import json
import os
import shutil
import subprocess

import pytest

import envlog

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "fixtures", "envs")


def _bin():
    path = os.environ.get("ENVLOG_BIN")
    if not path:
        raise pytest.UsageError("ENVLOG_BIN is not set: run the suite with "
                                "`make check-python`, or set it to the envlog command "
                                "of the same build")
    if not os.access(path, os.X_OK):
        raise pytest.UsageError(f"ENVLOG_BIN={path}: not an executable")
    return path


class Cli:
    """Runs the envlog command; json() parses its --json lines."""

    def __init__(self, path):
        self.path = path

    def run(self, *args, env_dir=None, ok=(0,)):
        cmd = [self.path] + (["-C", str(env_dir)] if env_dir is not None else []) + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if p.returncode not in ok:
            raise AssertionError(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
        return p

    def json(self, *args, env_dir=None, ok=(0,)):
        """Its --json lines in the package's form: checksums as ints (JSON may
        show them as "0x..." text), without the line's type and
        schema_version (which say what a line is, not what it holds)."""
        out = self.run("--json", *args, env_dir=env_dir, ok=ok).stdout
        return [plain(json.loads(line)) for line in out.splitlines() if line.strip()]


def lines(text):
    """JSON lines (a state's dump, `envlog replay`) in the package's form."""
    return [plain(json.loads(line)) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def cli():
    return Cli(_bin())


@pytest.fixture
def env_dir(tmp_path):
    return tmp_path / "env"


@pytest.fixture
def env(env_dir):
    e = envlog.open(str(env_dir))
    yield e
    e.close()


@pytest.fixture
def fixture_env(tmp_path):
    """A copy of a C-written fixture environment (reading never writes, but
    a copy keeps the tree clean whatever a test does)."""
    def copy(name):
        dst = tmp_path / name
        shutil.copytree(os.path.join(FIXTURES, name), dst, symlinks=True)
        return dst
    return copy


def plain(v):
    if isinstance(v, dict):
        envelope = isinstance(v.get("schema_version"), int) and "type" in v
        return {k: int(x, 16) if k == "checksum" and isinstance(x, str) and x.startswith("0x")
                else plain(x) for k, x in v.items()
                if not (envelope and k in ("type", "schema_version"))}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def hexify(v):
    """A record dict as JSON shows it: byte strings as hex, an inline item's
    integer keys as kN."""
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, dict):
        # JSON names an integer key of an inline item kN.
        return {(k if isinstance(k, str) else f"k{k}"): hexify(x) for k, x in v.items()}
    if isinstance(v, list):
        return [hexify(x) for x in v]
    return v
