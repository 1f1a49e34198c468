"""The CLI's runner: the implementation under test runs in a worker process, each case under a time limit, and
every verdict is formed in the CLI's own process.

Why a worker: code under test can end the process (sys.exit(0), os._exit, a crash) or never return; in the
CLI's own process the first would exit 0 with no verdict, which a CI gate reads as a pass, and the second hangs
with no output. Here the worker imports --apply / --frequencies and calls it on the cases one after the other,
telling the CLI over a pipe (JSON lines: booted, ready or bad, then start / done per case, end). A `done` carries
what the code returned and nothing judged (run.observe: outputs in their own dtype, inputs changed, what it
raised); the CLI checks that record (shapes, dtypes, sizes), forms the rows itself (run.judge: tolerances and bug
classes live only in the CLI's process, so code that replaces them in the worker changes nothing), and alone
decides the exit status:
- importing --apply gets max(timeout, IMPORT_MIN_S) s; a hang there is a one-line refusal (exit 2);
- a case that does not finish within `timeout` s is a FAIL row `timeout after N s`; the worker is killed and a
  new one runs the remaining cases;
- a worker that ends during a case (exit, signal, a broken pipe), or a message that is not a well-formed record
  of the case the CLI asked for (rows written on the pipe by the code under test), is an `error` row;
- after MAX_STOPS timeouts or endings the remaining cases are `error` rows `not run` (a hang in every case
  would otherwise cost cases x timeout).
One worker serves the whole run on the normal path (one interpreter start, about the cost of importing torch).
The worker is in its own session, so a terminal's Ctrl-C reaches only the CLI, which kills it and stops; a
KeyboardInterrupt inside the worker can only come from the code under test, and is an `error` row there. Its
stdout and stderr are pipes the CLI drains onto its own stderr, and at the end the CLI kills the worker's session,
every process in it, every descendant of the worker and every process whose environment carries the worker's
mark (Linux: /proc), so nothing the code under test started outlives the run or holds the caller's output open.
What remains possible, since the code under test runs with the user's rights: it can compute (or read from the
suite's golden file) the right outputs and send them as its record, which is a pass; a process it starts with
its environment cleared, double-forked into a session of its own, is not found (it holds no pipe of the caller's);
and it can stop (SIGSTOP) or kill the CLI, which then hangs or dies by a signal, never exits 0 (a CI job's own time
limit ends a stopped one).
"""
import json
import os
import selectors
import signal
import subprocess
import sys
import time

from harness.conformance import reaper

TIMEOUT_S = 60.0
IMPORT_MIN_S = 30.0  # importing --apply may take longer than a case (transformers: seconds on a busy machine)
MAX_STOPS = 3
BOOT_S = 600.0  # the worker's own start (torch, the golden file): a safety limit only
MARK = "HARNESS_CONFORMANCE_WORKER"


class _Ended(Exception):
    """The worker stopped talking: why, in a few words (`timeout after 5 s`, `exit code 0`, ...)."""

    def __init__(self, why, timeout=False):
        super().__init__(why)
        self.timeout = timeout


class _Worker:
    """One worker process and the CLI's end of its pipe."""

    def __init__(self, spec, case_ids):
        read, write = os.pipe()
        env = dict(os.environ)
        # the modules the CLI's process would import for --apply are the worker's too (a test's sys.path, '')
        env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
        # inherited by everything it starts, so the end of the run finds them wherever they moved (reaper.py)
        self.mark = env[MARK] = f"{os.getpid()}-{time.monotonic_ns()}-{os.urandom(4).hex()}"
        try:  # its prints come through a pipe of ours onto our stderr (stdout holds the table)
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "harness.conformance.isolate", str(write),
                 json.dumps({**spec, "cases": case_ids})],
                pass_fds=(write,), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                env=env, start_new_session=True)
        finally:
            os.close(write)
        self.pipe = os.fdopen(read, "rb", buffering=0)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.pipe, selectors.EVENT_READ)
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buf = b""

    def _relay(self):
        """Copy what the worker printed onto our stderr; False at its end."""
        try:
            chunk = os.read(self.proc.stdout.fileno(), 65536)
        except BlockingIOError:
            return True
        except OSError:
            chunk = b""
        if not chunk:
            self.sel.unregister(self.proc.stdout)
            return False
        try:
            sys.stderr.write(chunk.decode(errors="replace"))
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        return True

    def next(self, limit):
        """The worker's next message (a dict) within limit s; raises _Ended."""
        deadline = time.monotonic() + limit
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            ready = self.sel.select(left) if left > 0 else []
            if not ready:
                raise _Ended(f"timeout after {limit:g} s", timeout=True)
            for key, _ in ready:
                if key.fileobj is self.proc.stdout:
                    self._relay()
                    continue
                chunk = self.pipe.read(65536)
                if not chunk:
                    raise _Ended(self._how_it_ended())
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        if not isinstance(msg, dict) or "event" not in msg:
            raise _Ended("its channel to the suite broke (not a message)")
        return msg

    def _how_it_ended(self):
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "it closed its channel to the suite"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def close(self):
        for _ in range(3):  # what it started may start more while we look: look again until none is left
            family = reaper.family(self.proc.pid, MARK, self.mark)
            for pid in family:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    self.proc.kill()
            if not family:
                break
        self.proc.wait()
        if any(k.fileobj is self.proc.stdout for k in self.sel.get_map().values()):
            for _ in range(64):  # what is already in the pipe, never waiting for more
                if not self.sel.select(0) or not self._relay():
                    break
        self.sel.close()
        self.pipe.close()
        self.proc.stdout.close()


def run(spec, echo=None, timeout=TIMEOUT_S):
    """(rows, messages) of the cases spec selects, run in worker processes; ValueError (one line) where --apply or
    --frequencies cannot be imported or called. spec: apply, frequencies, calling (conventions.Calling's fields,
    defaults filled in), dtype, rope_types."""
    from harness.conformance import channel, golden
    from harness.conformance import conventions as C
    from harness.conformance import run as R

    def say(line):
        msgs.append(line)
        if echo:
            echo(line)

    case_list, data = golden.load()
    calling = C.Calling(**spec["calling"])
    todo = R.selected(case_list, spec.get("rope_types"))
    rows, msgs, stops, first = [], [], 0, True
    while todo:
        worker, current, phase = _Worker(spec, [c["id"] for c in todo]), None, "boot"
        try:
            worker.next(BOOT_S)  # booted: torch and the golden file are in
            phase = "import"
            msg = worker.next(max(timeout, IMPORT_MIN_S))  # ready, or bad: what --apply / --frequencies are
            if msg["event"] == "bad":
                if first:
                    raise ValueError(msg["message"])
                raise _Ended(f"the worker could no longer import it: {msg['message']}")
            first = False
            while todo:
                msg = worker.next(timeout)
                if msg["event"] == "start":
                    current = next((c for c in todo if c["id"] == msg.get("case")), None)
                    if current is None:
                        raise _Ended("its channel to the suite broke (a case it was not given)")
                    continue
                if msg["event"] != "done" or current is None or msg.get("case") != current["id"]:
                    raise _Ended("its channel to the suite broke (out of order)")
                arrays = golden.case_arrays(data, current)
                try:
                    record = channel.unpack(msg.get("record"), current, arrays)
                except ValueError as e:
                    raise _Ended(f"its channel to the suite broke (not a record of the case: {e})") from None
                case_rows, case_msgs = R.judge(record, calling, current, arrays, spec["dtype"])
                rows += case_rows
                for line in case_msgs:
                    say(line)
                todo.remove(current)
                current = None
        except _Ended as e:
            if first:  # never got to a case: our worker's own start failed, or the import hung or ended it
                if phase == "boot":
                    raise ValueError(f"the suite's worker process failed to start ({e})") from None
                imports = " or --frequencies " + repr(spec["frequencies"]) if spec.get("frequencies") else ""
                raise ValueError(f"--apply {spec['apply']!r}{imports}: importing it "
                                 + (f"did not finish in {max(timeout, IMPORT_MIN_S):g} s (raise --timeout if it is "
                                    f"only slow)"
                                    if e.timeout else f"ended the worker process ({e})")) from None
            stops += 1
            case = current or todo[0]
            layout = spec["calling"]["layout"]
            if e.timeout:
                rows.append(R._row(case, layout, "rotation", "FAIL", bug=str(e)))
                say(f"{case['id']} [{layout}, {spec['dtype']}]: {e}: the call did not return (raise --timeout if it "
                    f"is only slow)")
            else:
                rows.append(R._row(case, layout, "rotation", "error", bug=f"worker ended: {e}"))
                say(f"{case['id']} [{layout}, {spec['dtype']}]: the code under test ended the worker process ({e})")
            todo.remove(case)
            if stops >= MAX_STOPS and todo:
                rows += [R._row(c, layout, "rotation", "error", bug=f"not run: stopped after {MAX_STOPS} timeouts "
                                                                     f"or worker endings") for c in todo]
                say(f"{len(todo)} remaining cases not run: the suite stopped after {MAX_STOPS} timeouts or worker "
                    f"endings")
                todo = []
        finally:
            worker.close()
    return rows, msgs


def _worker(fd, spec):
    """The worker: import the code under test, run spec's cases in order, tell the CLI on fd."""
    pipe = os.fdopen(fd, "w", buffering=1)

    def send(**msg):
        pipe.write(json.dumps(msg) + "\n")
        pipe.flush()

    from harness.conformance import adapters, channel, golden
    from harness.conformance import conventions as C
    from harness.conformance import run as R
    case_list, data = golden.load()
    calling = C.Calling(**spec["calling"])
    send(event="booted")
    try:
        fn = adapters.resolve(spec["apply"], "--apply")
        C.check_signature(fn, calling.convention, spec["apply"])
        freq = adapters.resolve(spec["frequencies"], "--frequencies") if spec.get("frequencies") else None
        if freq is not None and not (callable(freq) or hasattr(freq, "keys")):
            raise ValueError(f"--frequencies {spec['frequencies']!r} is neither a function nor a mapping of them")
    except ValueError as e:
        send(event="bad", message=str(e))
        return
    except BaseException as e:  # check_signature / hasattr running their code (a property, __signature__)
        send(event="bad", message=f"--apply {spec['apply']!r}: {adapters.describe(e)}")
        return
    send(event="ready")
    R.CATCH_INTERRUPT = True
    by_id = {c["id"]: c for c in case_list}
    for cid in spec["cases"]:
        send(event="start", case=cid)
        case = by_id[cid]
        record = R.observe_one(fn, calling, case, golden.case_arrays(data, case), spec["dtype"], freq)
        try:
            packed = channel.pack(record)
        except BaseException as e:  # an output of theirs that will not become numbers (a tensor subclass, ...)
            packed = channel.pack({**record, "rot": {"error": f"unreadable output: {adapters.describe(e)}",
                                             "type": type(e).__name__}})
        send(event="done", case=cid, record=packed)
    send(event="end")


if __name__ == "__main__":
    _worker(int(sys.argv[1]), json.loads(sys.argv[2]))
    sys.stdout.flush()
    os._exit(0)  # no atexit or thread of the code under test runs after the last case
