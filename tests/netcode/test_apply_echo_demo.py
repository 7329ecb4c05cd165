"""The edge-lab demo of ``examples/`` built from ``examples/network.yaml``: ``echo_setup.py``
applies the file to a running ziti-lite and enrolls two identities with the OpenZiti Python
SDK, ``echo_host.py`` binds the service through the embedded router and ``echo_client.py``
dials it and gets its message back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_echo_demo_runs_from_the_network_file(ziti_lite_clean, tmp_path):
    pytest.importorskip("openziti")
    ctl = ziti_lite_clean
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    setup = subprocess.run([sys.executable, EXAMPLES / "echo_setup.py", ctl.url, ctl.admin_user, ctl.admin_password],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert "applied 8 change(s)" in setup.stdout and "tests: 5 of 5 pass" in setup.stdout
    assert "enrolled echo-host" in setup.stdout and "enrolled echo-client" in setup.stdout
    host = subprocess.Popen([sys.executable, EXAMPLES / "echo_host.py", "echo-host.json"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert host.stdout is not None
        assert "hosting 'echo'" in host.stdout.readline()
        # the host's bind reaches the router a moment after it starts listening: the client's
        # dial is retried (the C SDK fails it fast while the service has no terminator)
        for _ in range(20):
            client = subprocess.run([sys.executable, EXAMPLES / "echo_client.py", "echo-client.json", "hi, lab"],
                                    cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
            if client.returncode == 0:
                break
        assert client.returncode == 0, client.stdout + client.stderr
        assert client.stdout.strip() == "hi, lab"
    finally:
        host.terminate()
        host.wait(10)
        if host.stdout is not None:
            host.stdout.close()
    # a second run: the network is already what the file says, the identities are enrolled
    again = subprocess.run([sys.executable, EXAMPLES / "echo_setup.py", ctl.url, ctl.admin_user, ctl.admin_password],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "Plan: nothing to do" in again.stdout, again.stdout + again.stderr
