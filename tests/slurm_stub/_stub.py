"""A one-machine SLURM for tests: sbatch / srun / sacct / scancel with the behaviour submitit relies on.

State lives in $SLURM_STUB_DIR: next_id, <job>.sbatch (the submitted script, for inspection) and one
<job>_<task>.state per array task (PENDING -> RUNNING -> COMPLETED | FAILED | CANCELLED), which `sacct`
reports. `sbatch` starts a detached scheduler that runs the array's tasks at most %P at once."""
import os
import re
import subprocess
import sys
import time
from pathlib import Path

STATE = Path(os.environ.get("SLURM_STUB_DIR", "/tmp/slurm_stub"))


def _expand(pattern, env):
    for key, var in (("%A", "SLURM_ARRAY_JOB_ID"), ("%a", "SLURM_ARRAY_TASK_ID"), ("%j", "SLURM_JOB_ID")):
        pattern = pattern.replace(key, env.get(var, ""))
    return pattern.replace("%t", env.get("SLURM_PROCID", "0"))


def _set(state, text):
    """Write a state file atomically: sacct, scancel, the scheduler and the test read these files while
    they change, and a plain write_text truncates first, so a reader could see an empty state."""
    tmp = state.with_name(f".{state.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, state)


def _flags(script):
    return dict(re.findall(r"^#SBATCH --([\w-]+)(?:=(.*))?$", script, re.M))


def sbatch(args):
    script_path = Path(args[-1])
    script = script_path.read_text()
    STATE.mkdir(parents=True, exist_ok=True)
    counter = STATE / "next_id"
    job = int(counter.read_text()) if counter.exists() else 1000
    counter.write_text(str(job + 1))
    # the scheduler runs this copy, as SLURM runs the script as it was at submission (submitit moves the file it
    # passed into the job's folder once sbatch returns)
    copy = STATE / f"{job}.sbatch"
    copy.write_text(script)
    flags = _flags(script)
    m = re.fullmatch(r"(\d+)-(\d+)(?:%(\d+))?", flags.get("array") or "0-0")
    tasks = list(range(int(m.group(1)), int(m.group(2)) + 1))
    for t in tasks:
        _set(STATE / f"{job}_{t}.state", "PENDING")
    parallel = int(m.group(3) or len(tasks))
    subprocess.Popen([sys.executable, __file__, "_schedule", str(job), str(copy), str(parallel),
                      *map(str, tasks)], start_new_session=True, stdout=subprocess.DEVNULL,
                     stderr=open(STATE / f"{job}.scheduler.log", "w"))  # a crash is readable there
    print(f"Submitted batch job {job}")


def _ready(path, timeout=60.0):
    """path, once its folder exists (at most `timeout` s) and a moment more. SLURM starts a job some time after
    sbatch returns; submitit learns the job id from sbatch's answer and only then makes the job's log folder and moves
    its pickle there. A scheduler that started the task at once found no folder (and died, every task left
    PENDING): the race showed up on a loaded machine."""
    folder, deadline = Path(path).parent, time.time() + timeout
    while not folder.is_dir() and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # the pickle is moved in right after the folder is made
    return path


def _schedule(job, script_path, parallel, tasks):
    """Run each array task as `bash script` with the SLURM variables a job sees, `parallel` at a time."""
    flags, running, queue = _flags(Path(script_path).read_text()), {}, list(tasks)
    while queue or running:
        while queue and len(running) < parallel:
            t = queue.pop(0)
            state = STATE / f"{job}_{t}.state"
            if state.read_text() == "CANCELLED":
                continue
            env = {**os.environ, "SLURM_JOB_ID": f"{job}{t:04d}", "SLURM_ARRAY_JOB_ID": job,
                   "SLURM_ARRAY_TASK_ID": str(t), "SLURM_NTASKS": "1", "SLURM_JOB_NUM_NODES": "1",
                   "SLURM_NODEID": "0", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_JOB_NODELIST": "localhost"}
            try:
                out = open(_ready(_expand(flags.get("output", os.devnull), env)), "a")
            except OSError:  # no log folder after the wait: the task fails, as under SLURM, not the scheduler
                _set(state, "FAILED")
                continue
            _set(state, "RUNNING")
            running[t] = (subprocess.Popen(["bash", script_path], env=env, stdout=out, stderr=subprocess.STDOUT,
                                           start_new_session=True), state)
        for t, (proc, state) in list(running.items()):
            if proc.poll() is not None:
                if state.read_text() != "CANCELLED":
                    _set(state, "COMPLETED" if proc.returncode == 0 else "FAILED")
                del running[t]
        time.sleep(0.1)


def srun(args):
    """srun --unbuffered --output OUT [--error ERR] cmd...: one task, here, output to the expanded paths."""
    out = err = None
    while args and args[0].startswith("--"):
        flag = args.pop(0)
        if flag in ("--output", "--error"):
            path = _expand(args.pop(0), os.environ)
            out, err = (path, err) if flag == "--output" else (out, path)
    env = {**os.environ, "SLURM_STEP_ID": "0"}
    with open(out or os.devnull, "a") as o, open(err or out or os.devnull, "a") as e:
        sys.exit(subprocess.call(args, env=env, stdout=o, stderr=e))


def sacct(args):
    ids = [args[i + 1] for i, a in enumerate(args) if a == "-j"]
    print("JobID|State|NodeList")
    for job in ids:
        for state in sorted(STATE.glob(f"{job}_*.state")):
            print(f"{state.stem}|{state.read_text()}|localhost")


def scancel(args):
    for job in (a for a in args if not a.startswith("-")):
        for state in STATE.glob(f"{job.split('_')[0]}_*.state"):
            if state.read_text() in ("PENDING", "RUNNING"):
                _set(state, "CANCELLED")


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    if command == "_schedule":
        _schedule(rest[0], rest[1], int(rest[2]), [int(t) for t in rest[3:]])
    else:
        {"sbatch": sbatch, "srun": srun, "sacct": sacct, "scancel": scancel}[command](rest)
