"""The sandbox's first process inside its namespaces: run as a script (`python -I -S launcher.py CONFIG`), it uses
the standard library only and imports nothing of agentgrad.

`unshare` starts it as PID 1 of new mount, PID, IPC, UTS (and network) namespaces. It makes the view of the files
that `mounts.MountPlan` describes, starts the code as PID 2 with its resource limits and without privileges, reaps
every process until the code exits, and writes one JSON report to the status pipe: the code's wait status, the
CPU time and peak memory of its processes, and the limit the Python bootstrap noted. When the control pipe
becomes readable (the parent closed it, or died) it kills every other process of the namespace. If it cannot set
up the run it reports why, and the code never starts.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import select
import signal
import stat
import sys
from types import FrameType
from typing import Any

MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x1000, 0x4000, 0x40000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, AT_RECURSIVE, AT_FDCWD = 0x1, 0x2, 0x8000, -100
SYS_MOUNT_SETATTR = 442  # the same number on every architecture that has it (Linux 5.12+)
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 4, 24, 28, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECUREBITS_LOCKED_NOROOT = 0xEF  # noroot, no-setuid-fixup, no-ambient-raise, each locked; keep-caps locked off


class LaunchError(Exception):
    """The run could not be set up (the message says which step and why)."""


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


class Kernel:
    """The system calls Python 3.10 has no wrapper for, through libc."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)

    def mount(self, source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
        encoded = [None if text is None else text.encode() for text in (source, target, fstype, data)]
        self._check(self._libc.mount(encoded[0], encoded[1], encoded[2], ctypes.c_ulong(flags), encoded[3]),
                    f"mount {source} on {target}")

    def mount_attrs(self, path: str, *, recursive: bool, add: int = 0, clear: int = 0) -> None:
        attrs = _MountAttr(add, clear, 0, 0)
        done = self._libc.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD),
                                  ctypes.c_char_p(path.encode()), ctypes.c_uint(AT_RECURSIVE if recursive else 0),
                                  ctypes.byref(attrs), ctypes.c_size_t(ctypes.sizeof(attrs)))
        self._check(done, f"mount_setattr {path} (needs Linux 5.12+)")

    def prctl(self, option: int, value: int, extra: int = 0) -> None:
        done = self._libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(extra),
                                ctypes.c_ulong(0), ctypes.c_ulong(0))
        self._check(done, f"prctl {option}")

    @staticmethod
    def _check(result: int, what: str) -> None:
        if result != 0:
            number = ctypes.get_errno()
            raise LaunchError(f"{what}: {os.strerror(number)}")


def make_view(kernel: Kernel, plan: dict[str, Any]) -> None:
    """Make the mounts of the plan: cover, bind back, link, then everything read-only but the working directory."""
    kernel.mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount may reach the host
    sources = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in [*plan["expose"], plan["writable"]]}
    if plan["sysfs"]:
        kernel.mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for hidden in plan["hide"]:
        kernel.mount("tmpfs", hidden, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k")
    for path, source in sources.items():
        _mount_point(path, directory=stat.S_ISDIR(os.fstat(source).st_mode))
        kernel.mount(f"/proc/self/fd/{source}", path, None, MS_BIND | MS_REC)
        os.close(source)
    for link, target in plan["links"]:
        os.symlink(target, link)
    kernel.mount_attrs("/", recursive=True, add=MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID)
    kernel.mount_attrs(plan["writable"], recursive=False, clear=MOUNT_ATTR_RDONLY)


def _mount_point(path: str, *, directory: bool) -> None:
    """Make `path` (inside a covering tmpfs) if it is not there: a directory, or an empty file for a device."""
    if os.path.lexists(path):
        return
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    if directory:
        os.mkdir(path, 0o755)
    else:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))


def start_code(kernel: Kernel, config: dict[str, Any], note_fd: int | None) -> int:
    """Fork the code's process and exec it; its PID, once the exec has succeeded."""
    failed_read, failed_write = os.pipe()  # both close on exec: EOF without a message means the exec worked
    pid = os.fork()
    if pid == 0:
        os.close(failed_read)
        try:
            become_code(kernel, config, note_fd)
        except (OSError, ValueError, LaunchError) as error:
            os.write(failed_write, f"starting {config['argv'][0]}: {error}".encode())
        os._exit(127)
    os.close(failed_write)
    failure = _read_all(failed_read)
    if failure:
        os.waitpid(pid, 0)
        raise LaunchError(failure.decode(errors="replace"))
    return pid


def become_code(kernel: Kernel, config: dict[str, Any], note_fd: int | None) -> None:
    """In the forked child: limits, identity, no privileges, then exec the code (returns only by raising)."""
    for number in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD):  # Python ignores the first two; undo that
        signal.signal(number, signal.SIG_DFL)
    if note_fd is not None:  # the bootstrap writes the limit it saw to this descriptor, which the code inherits
        if note_fd == config["note_fd"]:
            os.set_inheritable(note_fd, True)
        else:  # never the exec-failure pipe: the note pipe is made first and takes the lower free descriptors
            os.dup2(note_fd, config["note_fd"])
    for name, soft, hard in config["rlimits"]:
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if config["uid"] is None:
        drop_capabilities(kernel)
    else:
        os.setgroups([])
        os.setresgid(config["uid"], config["uid"], config["uid"])
        os.setresuid(config["uid"], config["uid"], config["uid"])
    kernel.prctl(PR_SET_NO_NEW_PRIVS, 1)
    os.umask(0o022)
    os.chdir(config["cwd"])
    os.execvpe(config["argv"][0], config["argv"], config["env"])


def drop_capabilities(kernel: Kernel) -> None:
    """Root of a user namespace gives up every capability for good, so it cannot undo the read-only mounts."""
    with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as file:
        last = int(file.read())
    kernel.prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKED_NOROOT)
    for capability in range(last + 1):
        kernel.prctl(PR_CAPBSET_DROP, capability)
    kernel.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)


def supervise(code: int, control_fd: int) -> tuple[int, bool]:
    """Reap every process until the code exits; kill them all when the control pipe becomes readable.

    Returns the code's wait status and whether it was killed here.
    """
    wake_read, wake_write = os.pipe()
    for end in (wake_read, wake_write):
        os.set_blocking(end, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, _on_child)
    watched, killed = [control_fd, wake_read], False
    while True:
        status = _reap(code)
        if status is not None:
            return status, killed
        readable, _, _ = select.select(watched, [], [])
        if wake_read in readable:
            _read_available(wake_read)
        if control_fd in readable:
            watched.remove(control_fd)
            killed = _kill_all()


def _on_child(number: int, frame: FrameType | None) -> None:
    """SIGCHLD only has to wake `select` (through the wakeup fd); reaping happens in the loop."""


def _reap(code: int) -> int | None:
    """Reap every exited child; the code's wait status once it is among them."""
    while True:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return None
        if pid == code:
            return status


def _kill_all() -> bool:
    """SIGKILL every process of the namespace but this one; False when none was left."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _read_available(fd: int) -> bytes:
    """What a non-blocking pipe holds now."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _write_report(fd: int, report: dict[str, Any]) -> None:
    data = json.dumps(report).encode()
    while data:
        data = data[os.write(fd, data):]
    os.close(fd)


def _seal_inherited() -> None:
    """Every descriptor but stdin, stdout and stderr closes on exec, so the code inherits nothing else."""
    for name in os.listdir("/proc/self/fd"):
        number = int(name)
        if number > 2:
            try:
                os.set_inheritable(number, False)
            except OSError as error:  # the descriptor of the directory listing itself, closed by now
                if error.errno != errno.EBADF:
                    raise


def run(config: dict[str, Any]) -> dict[str, Any]:
    """Set up, run the code and say how it went (raises LaunchError, OSError when it cannot set up)."""
    kernel = Kernel()
    kernel.prctl(PR_SET_DUMPABLE, 0)  # the code may not ptrace or read the memory of this privileged process
    _seal_inherited()
    make_view(kernel, config["plan"])
    note_read, note_write = os.pipe() if config["note_fd"] is not None else (None, None)
    code = start_code(kernel, config, note_write)
    if note_write is not None:
        os.close(note_write)
    status, killed = supervise(code, config["control_fd"])
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    notes = [] if note_read is None else _nonblocking_notes(note_read).decode(errors="replace").split()
    return {"status": status, "killed": killed, "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "max_rss_kib": usage.ru_maxrss, "note": notes[-1] if notes else None}


def _nonblocking_notes(fd: int) -> bytes:
    os.set_blocking(fd, False)  # processes the code left behind may still hold the other end
    return _read_available(fd)


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    try:
        report = run(config)
    except (LaunchError, OSError, ValueError) as error:
        _write_report(config["status_fd"], {"error": str(error)})
        return 1
    _write_report(config["status_fd"], report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
