"""Sandboxed code can write only in its own working directory, which is removed after the run."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgrad.sandbox import Isolation, Sandbox
from agentgrad.sandbox.mounts import DEVICE_LINKS, DEVICES

HERE = Path(__file__).resolve().parent

TRY_WRITES = """
import json, os, sys
outcome = {}
for path in sys.argv[1:]:
    try:
        with open(path, "w") as file:
            file.write("escaped")
        outcome[path] = "written"
    except OSError as error:
        outcome[path] = error.strerror
print(json.dumps(outcome))
"""


@pytest.fixture
def open_dirs(tmp_path: Path) -> Iterator[list[Path]]:
    """Directories outside the sandbox that anyone may write to: one under /tmp, one on the checkout's disk."""
    under_tmp = tmp_path / "world-writable"
    under_tmp.mkdir()
    on_disk = Path(tempfile.mkdtemp(prefix="sandbox-outside-", dir=HERE))
    for folder in (under_tmp, on_disk):
        folder.chmod(0o777)
    yield [under_tmp, on_disk]
    for name in os.listdir(on_disk):
        os.remove(on_disk / name)
    on_disk.rmdir()


def test_writes_outside_the_working_directory_fail_and_leave_nothing(sandbox: Sandbox, open_dirs: list[Path]) -> None:
    in_tmp = Path("/tmp") / f"escape-{os.getpid()}"
    targets = [*(folder / "escape.txt" for folder in open_dirs), in_tmp, Path("/var/tmp") / f"escape-{os.getpid()}",
               HERE / f"escape-{os.getpid()}.py"]
    result = sandbox.run_python(TRY_WRITES, args=[str(path) for path in targets])
    assert result.ok, result.stderr
    outcome = json.loads(result.stdout)
    assert set(outcome) == {str(path) for path in targets}
    assert "written" not in outcome.values(), outcome
    assert outcome[str(in_tmp)] == "Read-only file system"  # /tmp is an empty read-only tmpfs in the sandbox
    for path in targets:
        assert not path.exists(), path


def test_the_rest_of_the_filesystem_is_read_only(sandbox: Sandbox, open_dirs: list[Path]) -> None:
    # The world-writable directory on the checkout's disk is visible, so it is the read-only mount that refuses.
    visible = sandbox.run_python("import os, sys\nprint(os.path.isdir(sys.argv[1]))", args=[str(open_dirs[1])])
    if visible.stdout.strip() != "True":
        pytest.skip(f"the checkout ({HERE}) lies under a directory the sandbox covers, so no world-writable "
                    "directory on disk is visible to it")
    result = sandbox.run_python(TRY_WRITES, args=[str(open_dirs[1] / "escape.txt")])
    assert json.loads(result.stdout) == {str(open_dirs[1] / "escape.txt"): "Read-only file system"}


def test_the_code_writes_in_its_working_directory_which_is_then_removed(sandbox: Sandbox) -> None:
    code = ("import os\nos.makedirs('out/deep')\nopen('out/deep/note.txt', 'w').write('kept')\n"
            "os.chmod('out', 0o500)\nprint(os.getcwd(), os.environ['HOME'], os.environ['TMPDIR'])\n"
            "print(open('out/deep/note.txt').read(), open('given.txt').read())\n")
    result = sandbox.run_python(code, files={"given.txt": "from the parent"})
    assert result.ok, result.stderr
    first, second = result.stdout.splitlines()
    workdir, home, tmpdir = first.split()
    assert workdir == home == tmpdir
    assert second == "kept from the parent"
    assert not os.path.exists(workdir)


def test_the_code_cannot_read_files_only_their_owner_may(sandbox: Sandbox, isolated: Isolation,
                                                         open_dirs: list[Path]) -> None:
    if not isolated.drops_user:
        pytest.skip("not root: the code runs as you (in a user namespace), so it may read what you may")
    folder = _visible_dir(sandbox, open_dirs[1])
    try:
        secret = folder / "private.txt"
        secret.write_text("root only")
        secret.chmod(0o600)
        result = sandbox.run_python("import sys\ntry:\n    print(open(sys.argv[1]).read())\nexcept OSError as e:\n"
                                    "    print(e.strerror)\n", args=[str(secret)])
        assert result.stdout.strip() == "Permission denied"
    finally:
        if folder != open_dirs[1]:
            shutil.rmtree(folder)


def _visible_dir(sandbox: Sandbox, preferred: Path) -> Path:
    """`preferred` if the sandbox sees it; else a new directory under /var/lib, which it always sees (a checkout
    under /tmp is covered by the sandbox's empty /tmp)."""
    seen = sandbox.run_python("import os, sys\nprint(os.path.isdir(sys.argv[1]))", args=[str(preferred)])
    return preferred if seen.stdout.strip() == "True" else Path(tempfile.mkdtemp(prefix="agentgrad-sandbox-",
                                                                                  dir="/var/lib"))


def test_host_temporary_files_and_devices_are_hidden(sandbox: Sandbox) -> None:
    with tempfile.NamedTemporaryFile(dir="/tmp", prefix="agentgrad-host-") as host_file:
        os.chmod(host_file.name, 0o644)
        code = "import os, sys\nprint(os.path.exists(sys.argv[1]), *sorted(os.listdir('/dev')))\n"
        result = sandbox.run_python(code, args=[host_file.name])
    exists, *devices = result.stdout.split()
    assert exists == "False"
    expected = {os.path.basename(path) for path in DEVICES if os.path.exists(path)}
    assert set(devices) == expected | {os.path.basename(link) for link, _ in DEVICE_LINKS}
    assert "null" in devices and "shm" not in devices


def test_the_code_sees_only_its_own_processes(sandbox: Sandbox) -> None:
    code = ("import os\npids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
            "print(len(pids), os.getpid(), os.getuid() == os.stat('/proc/1').st_uid)\n")
    count, pid, same_user = sandbox.run_python(code).stdout.split()
    assert int(count) <= 3 and pid == "2"  # the launcher is 1, the code 2
    if sandbox.isolation.drops_user:
        assert same_user == "False"  # the launcher is root, the code a user of its own
