"""Every example in conf/ is valid for Skiff and for the real nats-server, and both see the same configuration."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from skiff.server.conf import parse_file
from skiff.server.options import options_from_config
from tests.harness import ROOT, ServerProcess, nats_server_binary

EXAMPLES = sorted((ROOT / "conf").glob("**/*.conf"))  # conf/operator/ too


def test_there_are_examples():
    assert {p.name for p in EXAMPLES} >= {"dev.conf", "auth.conf", "token.conf", "tls.conf"}


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(ROOT / "conf")) for p in EXAMPLES])
def test_example_is_valid_for_both_with_the_same_digest(path: Path):
    theirs = subprocess.run([nats_server_binary(), "-c", str(path.relative_to(ROOT)), "-t"], cwd=ROOT,
                            capture_output=True, text=True, timeout=30)
    assert theirs.returncode == 0, theirs.stderr
    ours = subprocess.run([sys.executable, "-m", "skiff.server", "-c", str(path.relative_to(ROOT)), "-t"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert ours.returncode == 0, ours.stderr
    # nats-server prints the sha256 of the parsed file: equal digests mean equal parse trees.
    assert ours.stderr.rsplit("(", 1)[-1] == theirs.stderr.rsplit("(", 1)[-1]


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(ROOT / "conf")) for p in EXAMPLES])
def test_example_maps_to_options(path: Path, monkeypatch):
    monkeypatch.chdir(ROOT)  # tls.conf names its certificates relative to the repository root
    assert parse_file(str(path))
    o = options_from_config(str(path))
    assert o.config_file == str(path) and not o.config_warnings and not o.ignored_config_keys


def test_dev_conf_contents():
    o = options_from_config(str(ROOT / "conf" / "dev.conf"))
    assert o.jetstream and o.store_dir == "./data" and o.http_port == 8222 and o.server_name == "skiff-dev"


def test_auth_and_token_contents():
    auth = options_from_config(str(ROOT / "conf" / "auth.conf"))
    assert [u.user for u in auth.users] == ["alice", "bob"]
    assert auth.users[1].permissions.publish.allow == ["bob.>"]
    assert options_from_config(str(ROOT / "conf" / "token.conf")).authorization == "s3cr3t"


@pytest.mark.parametrize("name", ["dev.conf", "auth.conf", "token.conf"])
def test_example_starts_both_servers(name, target, tmp_path):
    """Started for real (ports and store directory overridden by flags, which win): the server answers INFO."""
    text = (ROOT / "conf" / name).read_text()
    # No -sd: with a store_dir in the file nats-server calls that a duplicate (test_store_dir_flag_and_file).
    srv = ServerProcess(kind=target, config=text, jetstream=False)
    srv.start()
    try:
        assert srv.proc.poll() is None
    finally:
        srv.cleanup()


def test_store_dir_flag_and_file_is_a_duplicate_for_both(tmp_path):
    conf = tmp_path / "s.conf"
    conf.write_text("jetstream { store_dir: \"./a\" }\n")
    args = ["-a", "127.0.0.1", "-p", "-1", "-c", str(conf), "-sd", str(tmp_path / "b")]
    theirs = subprocess.run([nats_server_binary(), *args], capture_output=True, text=True, timeout=30)
    ours = subprocess.run([sys.executable, "-m", "skiff.server", *args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert theirs.returncode == ours.returncode == 1
    assert "Duplicate 'store_dir' configuration" in theirs.stderr and "Duplicate 'store_dir' configuration" in ours.stderr
    assert f"{conf}:1:" in ours.stderr
