"""A run claims its directory with a lock file, so two sweeps on one `out=` share the work instead of both
computing every run (DESIGN.md §3).

`<run_dir>/.lock` is a JSON record of its holder: pid, host, start time and a random token. While the run goes
on, a thread refreshes the file's mtime every HEARTBEAT_S. A lock is stale, and is taken over, when its holder is a
dead pid on this host, or when its heartbeat is older than STALE_S (a holder on another host, whose pid cannot be
tested; or a pid that was reused). Claimers take turns under a `filelock.SoftFileLease` on `<run_dir>/.lock.claim`
(an O_EXCL marker, so it holds on NFS v3+ across SLURM nodes, as O_EXCL does), so judging a lock stale, removing it
and writing the new one is one step no other claimer interleaves with. Results never depend on the lock: every
write is atomic, so a lock wrongly judged stale costs a duplicated run, never a lost or mixed row.

Why the record is not filelock's own marker: the JSON record is the format other harness processes on the same
`out=` (and the fault battery's cases) write and read; and filelock judges another host's holder only by watching
its marker unchanged for a lease on the contender's own clock, which a claim that must answer at once (busy=skip)
cannot do, or by a marker age (`lifetime`) it warns against. So the record, its heartbeat and `alive` stay here."""
import json
import os
import secrets
import socket
import stat
import sys
import threading
import time
from pathlib import Path

import filelock

LOCK = ".lock"
HEARTBEAT_S = 30.0
STALE_S = 300.0  # ten missed heartbeats
POLL_S = 2.0
GUARD_LEASE_S = 10.0  # the claim guard is held for milliseconds; another host's orphaned guard is reclaimed after


def _path(run_dir) -> Path:
    return Path(run_dir) / LOCK


class Unusable(ValueError):
    """A .lock that is not a lock file (a directory, a FIFO): not ours to remove; one line naming it."""


def holder(run_dir):
    """The lock's content ({pid, host, since, token} plus its heartbeat `age_s`), or None when unlocked.
    A lock being written (empty or partial for a moment), or one of garbage, reads as {'age_s': ...} alone.
    Raises Unusable where .lock is not a regular file (reading a FIFO would block)."""
    p = _path(run_dir)
    try:
        st = p.lstat()
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise Unusable(f"{p} is {kind}, not a run lock: remove it")
        age = time.time() - st.st_mtime
        text = p.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    try:
        info = json.loads(text)
    except ValueError:
        info = {}
    return {**(info if isinstance(info, dict) else {}), "age_s": age}


def alive(info) -> bool:
    """Whether the lock described by `info` (from holder()) still has a live holder. A heartbeat more than
    STALE_S in the future (a clock ahead of this host's, a lock file copied with its times) proves nothing:
    another host's such lock is stale; on this host its pid decides."""
    if info["age_s"] > STALE_S:
        return False
    if info["age_s"] < -STALE_S and info.get("host") != socket.gethostname():
        return False
    if info.get("host") != socket.gethostname() or "pid" not in info:
        return True  # another host (or a lock still being written): the heartbeat decides
    try:
        os.kill(int(info["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a live process of another user
        return True
    return True


def describe(info) -> str:
    since = info.get("since")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)) if since else "?"
    return f"pid {info.get('pid', '?')} on host {info.get('host', '?')} since {when}"


class Lock:
    """A claimed run dir: heartbeats until release(); release() removes the file only while it is ours."""

    def __init__(self, run_dir, token):
        self.path, self.token, self._stop = _path(run_dir), token, threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True)
        self._beat.start()

    def _ours(self) -> bool:
        try:
            return json.loads(self.path.read_text()).get("token") == self.token
        except (OSError, ValueError, AttributeError):
            return False

    def _heartbeat(self):
        while not self._stop.wait(HEARTBEAT_S):
            if self._ours():
                os.utime(self.path)

    def release(self):
        self._stop.set()
        if self._ours():
            self.path.unlink(missing_ok=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def _guard(run_dir):
    """filelock's lease on <run_dir>/.lock.claim: one claimer at a time. A guard left by a dead
    process on this host is reclaimed by its pid; one from another host after GUARD_LEASE_S unchanged."""
    return filelock.SoftFileLease(f"{_path(run_dir)}.claim", lease_duration=GUARD_LEASE_S, timeout=3 * GUARD_LEASE_S)


def claim(run_dir):
    """Claim run_dir: a Lock, or None when a live process holds it. A stale lock is taken over, with one
    line on stderr naming its holder."""
    p = _path(run_dir)
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _guard(run_dir):
            info = holder(run_dir)
            if info is not None:
                if alive(info):
                    return None
                age = info["age_s"]
                when = f"{age:.0f}s ago" if age >= 0 else f"{-age:.0f}s in the future: a clock ahead of this host's"
                print(f"{run_dir}: taking over the stale lock of {describe(info)} (heartbeat {when})", file=sys.stderr)
                p.unlink(missing_ok=True)
            token = secrets.token_hex(8)
            try:  # O_EXCL still: a harness from before the guard claims without it
                fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
            except FileExistsError:
                return None
            with os.fdopen(fd, "w") as f:
                json.dump({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(), "token": token}, f)
    except filelock.Timeout:  # a claimer held the guard for 3 leases (a hung filesystem): busy, for now
        return None
    return Lock(run_dir, token)


def wait(run_dir, say=print):
    """Block while a live process holds run_dir's lock (saying so once); returns when it is free or stale."""
    said = False
    while (info := holder(run_dir)) is not None and alive(info):
        if not said:
            say(f"wait {run_dir}: being computed by {describe(info)}")
            said = True
        time.sleep(POLL_S)


def live_locks(root):
    """Run dirs under root whose lock has a live holder (a .lock that is no lock file holds nothing)."""
    out = []
    for p in Path(root).glob(f"*/{LOCK}"):
        try:
            info = holder(p.parent)
        except Unusable:
            continue
        if info and alive(info):
            out.append(p.parent)
    return sorted(out)
