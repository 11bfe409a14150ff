"""Sandboxed code has no network: not even the loopback of the machine it runs on.

Each test listens in the test process and shows the code cannot reach it; the control test shows the same code
does reach it when the sandbox is told to share the network, so the failure is the namespace's doing.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from agentgrad.sandbox import Isolation, Sandbox
from tests.sandbox.conftest import FAST

CONNECT = """
import json, socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2) as conn:
        conn.sendall(b"hello from the sandbox")
    print(json.dumps({"connected": True}))
except OSError as error:
    print(json.dumps({"connected": False, "error": str(error)}))
"""


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


def _accepted(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def test_code_cannot_connect_to_a_socket_listening_on_localhost(sandbox: Sandbox, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    result = sandbox.run_python(CONNECT, args=["127.0.0.1", str(port)])
    assert result.ok, result.stderr
    answer = json.loads(result.stdout)
    assert answer["connected"] is False and "unreachable" in answer["error"].lower()
    assert not _accepted(listener)


def test_code_cannot_reach_an_outside_address(sandbox: Sandbox) -> None:
    result = sandbox.run_python(CONNECT, args=["192.0.2.1", "80"])  # TEST-NET-1: never routed anywhere
    answer = json.loads(result.stdout)
    assert answer["connected"] is False and "unreachable" in answer["error"].lower()


def test_the_only_interface_is_a_loopback_that_is_down(sandbox: Sandbox) -> None:
    code = """
import fcntl, socket, struct
names = sorted(name for _, name in socket.if_nameindex())
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
    request = struct.pack("16sH", b"lo", 0)
    flags = struct.unpack("16sH", fcntl.ioctl(probe.fileno(), 0x8913, request))[1]  # SIOCGIFFLAGS
print(" ".join(names), flags & 0x1)  # IFF_UP
"""
    assert sandbox.run_python(code).stdout.split() == ["lo", "0"]
    assert sandbox.run("ls /sys/class/net").stdout.split() == ["lo"]  # its own sysfs, not the host's


def test_code_cannot_reach_an_abstract_unix_socket_of_the_host(sandbox: Sandbox) -> None:
    # Abstract unix sockets belong to the network namespace: a new one hides the host's.
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = f"agentgrad-sandbox-test-{id(server)}"
    server.bind("\0" + name)
    server.listen(1)
    server.setblocking(False)
    try:
        code = ("import socket, sys\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(chr(0) + sys.argv[1])\n"
                "    print('connected')\nexcept OSError as error:\n    print('refused', error.errno)\n")
        result = sandbox.run_python(code, args=[name])
        assert result.stdout.startswith("refused"), result.stdout + result.stderr
        assert not _accepted(server)
    finally:
        server.close()


def test_with_network_allowed_the_same_code_does_connect(isolated: Isolation, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    result = Sandbox(FAST, network=True).run_python(CONNECT, args=["127.0.0.1", str(port)])
    assert json.loads(result.stdout) == {"connected": True}, result.stderr
    assert _accepted(listener)
