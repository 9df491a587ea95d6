"""Run programs lutcore does not trust (a C model, the C compiler on a user's file) so that
all of it ends with the call: every process they start, however it detaches, and
whatever happens to the caller.

Design: two sides in one file, which imports the standard library only.  ``run`` is the
caller's side (lutcore's process).  It starts this file as a small Python of its own
(``python -I -S _child.py``: none of the caller's imports, threads or state) — the
*keeper* — in a new session, and talks to it through pipes: the keeper's stdin (the
caller holds the only write end: a byte then end-of-file is "stop now"; end-of-file
alone means the caller died), the keeper's stdout (one status line, at the end) and the
programs' stdout and stderr (the caller reads them, counting bytes against a cap).

The keeper (``_keep``):
  * on Linux, makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER) before it
    starts anything, so every process a program starts — one that double-forks and calls
    setsid() too — stays its descendant, and comes back to it when its parent ends;
  * runs the commands one after the other (the compiler's two steps; the model), each
    forked into its own process group with a parent-death signal (SIGKILL: it dies with
    the keeper), RLIMIT_AS, RLIMIT_FSIZE, no core file, stdin /dev/null, and stops at the
    first that does not exit 0;
  * meanwhile watches its stdin (a byte: the caller stops it; end-of-file alone: the
    caller died) and its parent (a change: the caller died while another process — a
    fork of the caller — held the pipe's write end);
  * after each command, and when stopped, kills every descendant left: SIGKILL to each
    child, reap, again until it has no child at all (those a dying child leaves come to it);
  * then writes ``exit N`` / ``signal N`` (of the last command run, with ``step K``) or
    ``stopped`` and exits — when the caller died, after removing the caller's temporary
    directory ``orphan_dir`` if one was named (nobody else would).
The caller owns the time limit and the output cap: reaching either, or Ctrl-C, is "stop
now" on the keeper's stdin; a keeper that has not ended ``KEEPER_GRACE`` seconds later is killed with its
process group.

The limit: a descendant outlives the call only if the keeper itself is killed with SIGKILL
(the running command dies with it through its parent-death signal; what that command had
started goes to init), or through another process it asks to run something (a daemon,
cron, ssh).  Without PR_SET_CHILD_SUBREAPER (not Linux) a process that leaves the
command's process group (setsid) is not found.

    run(cmds, cwd, timeout, *, memory, file_size, output_cap, keep=0, env=None, orphan_dir=None) -> Ended
"""
from __future__ import annotations

import os
import signal
import sys
import time

KEEPER_GRACE = 10.0         # seconds a stopped keeper has to kill everything and end
TAIL = 4096                 # bytes of the end of stderr kept (the program's last words)
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36


class Ended:
    """How a ``run`` ended.  ``how``: "exit" (``code`` the status; 0 only when every command
    exited 0), "signal" (``code`` the signal number), "timeout" (the time limit), "output"
    (more than ``output_cap`` bytes on stdout + stderr), or "error" (``message`` says what).
    ``step``: the index of the command the status belongs to.  ``head``: the first ``keep``
    bytes of stderr; ``tail``: its last TAIL bytes; ``written``: bytes on stdout + stderr."""

    def __init__(self, how, code=None, step=0, head=b"", tail=b"", written=0, message=""):
        self.how, self.code, self.step = how, code, step
        self.head, self.tail, self.written, self.message = head, tail, written, message

    def __repr__(self):
        return f"Ended({self.how!r}, code={self.code}, step={self.step}, written={self.written})"


# ------------------------------------------------------------------------- the caller's side
def run(cmds, cwd, timeout, *, memory, file_size, output_cap, keep=0, env=None, orphan_dir=None) -> Ended:
    """Run the commands ``cmds`` (lists of str; one after another while each exits 0) in
    ``cwd`` under a keeper, for at most ``timeout`` seconds in all, ``memory`` bytes of
    address space and ``file_size`` bytes per file written, each; more than ``output_cap``
    bytes on stdout + stderr stops them.  Every process they started has ended when this
    returns or raises (Ctrl-C included), and ends if this process is killed — the keeper
    then removes ``orphan_dir`` (the caller's temporary directory), if given."""
    import selectors
    import subprocess
    argv = [sys.executable, "-I", "-S", os.path.abspath(__file__), str(int(memory)), str(int(file_size))]
    r_out, w_out = os.pipe()
    r_err, w_err = os.pipe()
    argv += [str(w_out), str(w_err), os.fspath(orphan_dir) if orphan_dir else ""]
    for c in cmds:
        argv += [str(len(c))] + [os.fspath(x) for x in c]
    try:
        keeper = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, pass_fds=(w_out, w_err), start_new_session=True)
    except BaseException:
        for fd in (r_out, r_err):
            os.close(fd)
        raise
    finally:
        os.close(w_out)
        os.close(w_err)
    sel = selectors.DefaultSelector()
    status_fd = keeper.stdout.fileno()
    sel.register(r_out, selectors.EVENT_READ, "out")
    sel.register(r_err, selectors.EVENT_READ, "err")
    sel.register(status_fd, selectors.EVENT_READ, "status")
    state = {"stopped": None, "grace": None}
    head, tail, status = bytearray(), bytearray(), bytearray()
    written = 0

    def close_stdin():                          # the keeper's "stop now": a byte, then end-of-file
        try:
            if not keeper.stdin.closed:
                keeper.stdin.write(b"s")
            keeper.stdin.close()
        except OSError:
            pass

    def stop(why):
        if state["stopped"] is None:
            state["stopped"] = why
            state["grace"] = time.monotonic() + KEEPER_GRACE
        close_stdin()

    def kill_keeper():
        try:
            os.killpg(keeper.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def read(fd, what):
        nonlocal written
        try:
            data = os.read(fd, 1 << 16)
        except OSError:
            data = b""
        if not data:
            sel.unregister(fd)
            return False
        if what == "status":
            status.extend(data[:4096 - len(status)])
            return True
        written += len(data)
        if what == "err":
            if len(head) < keep:
                head.extend(data[:keep - len(head)])
            tail.extend(data)
            del tail[:-TAIL]
        if written > output_cap:
            stop("output")
        return True

    deadline = time.monotonic() + timeout
    try:
        while status_fd in sel.get_map():
            now = time.monotonic()
            if state["stopped"] is None and now >= deadline:
                stop("timeout")
            if state["grace"] is not None and now >= state["grace"]:
                kill_keeper()                           # it did not end: its group goes, it with it
                state["grace"] = now + KEEPER_GRACE
            until = deadline if state["stopped"] is None else state["grace"]
            for key, _ in sel.select(max(0.0, min(until - now, 1.0))):
                read(key.fd, key.data)
        # the keeper has ended, so has every writer of the pipes: what is left in them is read
        end = time.monotonic() + 1.0
        while len(sel.get_map()) and time.monotonic() < end:
            for key, _ in sel.select(0.1):
                read(key.fd, key.data)
    except BaseException:
        stop("interrupted")
        raise
    finally:
        sel.close()
        for fd in (r_out, r_err):
            os.close(fd)
        close_stdin()
        try:
            keeper.wait(KEEPER_GRACE)
        except subprocess.TimeoutExpired:
            kill_keeper()
            keeper.wait()
        keeper.stdout.close()
    out = dict(head=bytes(head), tail=bytes(tail), written=written)
    if state["stopped"] is not None:
        return Ended(state["stopped"], **out)
    words = bytes(status).decode("ascii", "replace").split()
    try:
        if words[:1] == ["step"] and words[2] in ("exit", "signal"):
            return Ended(words[2], int(words[3]), int(words[1]), **out)
    except (IndexError, ValueError):
        pass
    return Ended("error", message=f"the keeper process ended without a status (exit status {keeper.returncode}"
                                  f"{'; it said: ' + ' '.join(words) if words else ''})", **out)


# ------------------------------------------------------------------------- the keeper's side
def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        return libc
    except (OSError, AttributeError):
        return None


def _children(me):
    """Pids whose parent is ``me`` (zombies too)."""
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:       # the keeper has one thread
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        pass
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for n in names:
        if not n.isdigit():
            continue
        try:
            with open(f"/proc/{n}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[1]) == me:
                out.append(int(n))
        except (OSError, IndexError, ValueError):
            pass
    return out


def _kill_all(group):
    """Kill the command's process group and every descendant of the keeper; reap them all.
    -> False when some did not end within KEEPER_GRACE seconds."""
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
    me, end = os.getpid(), time.monotonic() + KEEPER_GRACE
    while True:
        for pid in _children(me):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return True                             # no child at all, living or dead
        if time.monotonic() > end:
            return False
        time.sleep(0.002)


def _start(cmd, memory, file_size, out_fd, err_fd, libc):
    """Fork ``cmd`` with its limits; -> its pid (its own process group)."""
    keeper = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:                                            # the child: nothing here may return
        os.setpgid(0, 0)
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != keeper:                  # the keeper died before the line above
            os._exit(126)
        import resource
        for lim, v in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_FSIZE, file_size),
                       (resource.RLIMIT_CORE, 0)):
            soft, hard = resource.getrlimit(lim)
            v = v if hard == resource.RLIM_INFINITY else min(v, hard)
            resource.setrlimit(lim, (v, v))
        for s in ("SIGPIPE", "SIGXFSZ", "SIGXFZ"):  # Python ignores these; a C program expects them
            if hasattr(signal, s):
                signal.signal(getattr(signal, s), signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.closerange(3, 1 << 16)
        os.execv(cmd[0], cmd)
    except BaseException as e:                      # noqa: BLE001 - reported on its stderr
        try:
            os.write(2, f"lutcore could not start {cmd[0]}: {e}\n".encode("utf-8", "replace"))
        finally:
            os._exit(127)


def _wait(pid, parent, stop):
    """Wait for ``pid`` to end (-> its wait status) or for a stop (-> None, ``stop["by"]``
    "caller" or "death"): a byte or end-of-file on stdin, or a new parent (the caller died).
    Orphans that come here are reaped meanwhile."""
    import select
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            fds = [0] if pidfd is None else [0, pidfd]
            ready, _, _ = select.select(fds, [], [], 0.5 if pidfd is not None else 0.02)
            if 0 in ready:
                try:
                    said = os.read(0, 64)
                except OSError:
                    said = b""
                stop["by"] = "caller" if said else "death"
                return None
            if os.getppid() != parent:
                stop["by"] = "death"
                return None
            try:
                while True:
                    p, st = os.waitpid(-1, os.WNOHANG)
                    if p == 0:
                        break
                    if p == pid:
                        return st
            except ChildProcessError:
                return None
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _keep(argv):
    parent = os.getppid()
    memory, file_size, out_fd, err_fd = (int(x) for x in argv[:4])
    orphan_dir = argv[4]
    cmds, rest = [], argv[5:]
    while rest:
        n = int(rest[0])
        cmds.append(rest[1:1 + n])
        rest = rest[1 + n:]
    libc = _libc()
    if libc is not None:
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    report, stop = "stopped", {}
    for k, cmd in enumerate(cmds):
        pid = _start(cmd, memory, file_size, out_fd, err_fd, libc)
        st = _wait(pid, parent, stop)
        _kill_all(pid)
        if st is None:
            break
        if os.WIFSIGNALED(st):
            report = f"step {k} signal {os.WTERMSIG(st)}"
            break
        report = f"step {k} exit {os.waitstatus_to_exitcode(st)}"
        if os.waitstatus_to_exitcode(st) != 0:
            break
    os.close(out_fd)
    os.close(err_fd)
    if stop.get("by") == "death" and orphan_dir:
        import shutil
        shutil.rmtree(orphan_dir, ignore_errors=True)
    try:
        os.write(1, report.encode() + b"\n")
    except OSError:
        pass


if __name__ == "__main__":
    _keep(sys.argv[1:])
