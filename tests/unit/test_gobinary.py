"""A Go program's binary: found where go install puts it, its module version read from the build info."""

from __future__ import annotations

import os

from benchwatch.util import gobinary

# What Go writes into a binary (go version -m shows it): the main module, then each dependency.
BUILD_INFO = (b"\x00junk\tpath\texample.com/wrapper\n\tmod\texample.com/wrapper\t(devel)\t\n"
              b"\tdep\tgithub.com/owner/tool\tv1.0.3\th1:abc=\n\tdep\tgithub.com/owner/toolkit\tv2.1.0\t\n\x00")


def _binary(tmp_path, data: bytes, name: str = "tool") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    path.chmod(0o755)
    return str(path)


def test_the_module_version_by_kind(tmp_path):
    path = _binary(tmp_path, BUILD_INFO)
    assert gobinary.module_version(path, gobinary.module_pattern("github.com/owner/tool", ("mod", "dep"))) == "1.0.3"
    # Only as the main module: built as a dependency, it does not count.
    assert gobinary.module_version(path, gobinary.module_pattern("github.com/owner/tool")) is None
    # A longer module path that starts with the same words is another module.
    assert gobinary.module_version(path, gobinary.module_pattern("github.com/owner/toolkit", ("dep",))) == "2.1.0"
    # A build inside its own source tree records no version.
    assert gobinary.module_version(path, gobinary.module_pattern("example.com/wrapper")) is None
    assert gobinary.module_version(str(tmp_path / "missing"), gobinary.module_pattern("example.com/wrapper")) is None


def test_located_in_go_install_directories_in_order(tmp_path):
    gobin, gopath, home = tmp_path / "gobin", tmp_path / "gopath", tmp_path / "home"
    for directory in (gobin, gopath / "bin", home / "go" / "bin"):
        directory.mkdir(parents=True)
    in_home = _binary(home / "go" / "bin", b"")
    assert gobinary.locate("tool", {"HOME": str(home)}) == in_home
    in_gopath = _binary(gopath / "bin", b"")
    env = {"HOME": str(home), "GOPATH": os.pathsep.join([str(tmp_path / "none"), str(gopath)])}
    assert gobinary.locate("tool", env) == in_gopath
    assert gobinary.locate("tool", {**env, "GOBIN": str(gobin)}) == in_gopath  # GOBIN holds none
    in_gobin = _binary(gobin, b"")
    assert gobinary.locate("tool", {**env, "GOBIN": str(gobin)}) == in_gobin
    assert gobinary.locate("other", env) is None
    assert gobinary.locate(in_gobin, env) is None  # a path is the caller's to run as given
    os.chmod(in_gobin, 0o644)
    assert gobinary.locate("tool", {**env, "GOBIN": str(gobin)}) == in_gopath  # not executable: passed over
