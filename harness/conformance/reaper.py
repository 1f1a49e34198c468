"""What a worker started, wherever it moved: the CLI kills these at the end of a run (isolate.py), so no process
of the code under test outlives the suite or holds the caller's output open. A descendant that made a session of
its own is found by its parent chain while the worker lives, and after (reparented to init) by the mark the worker
put in its environment, which every child inherits unless it clears its environment.
"""
import os


def family(root, key, mark):
    """Pids of root's descendants, of the processes in root's session and of those whose environment holds
    key=mark, root and this process excluded (Linux: /proc; an empty list where there is none)."""
    table, marked, tag = {}, set(), f"{key}={mark}".encode() + b"\0"
    try:
        names = [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []
    for pid in names:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            table[pid] = (int(fields[1]), int(fields[3]))  # ppid, session
            with open(f"/proc/{pid}/environ", "rb") as f:
                if tag in f.read():
                    marked.add(pid)
        except (OSError, IndexError, ValueError):
            continue
    found = marked | {p for p, (_, sid) in table.items() if sid == root}
    while True:
        more = {p for p, (ppid, _) in table.items() if ppid == root or ppid in found} - found
        if not more:
            break
        found |= more
    return sorted(found - {root, os.getpid()})
