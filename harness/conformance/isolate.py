"""The CLI's runner: the implementation under test runs in a worker process, each case under a time limit.

Why a worker: code under test can end the process (sys.exit(0), os._exit, a crash) or never return; in the
CLI's own process the first would exit 0 with no verdict, which a CI gate reads as a pass, and the second hangs
with no output. Here the worker imports --apply / --frequencies and runs the cases one after the other, telling
the CLI over a pipe (JSON lines: booted, ready or bad, then start / done per case, end). The CLI alone decides
the exit status, from the rows it received:
- importing --apply gets max(timeout, IMPORT_MIN_S) s; a hang there is a one-line refusal (exit 2);
- a case that does not finish within `timeout` s is a FAIL row `timeout after N s`; the worker is killed (its
  whole process group) and a new one runs the remaining cases;
- a worker that ends during a case (exit, signal, a broken pipe) is an `error` row naming how it ended;
- after MAX_STOPS timeouts or endings the remaining cases are `error` rows `not run` (a hang in every case
  would otherwise cost cases x timeout).
One worker serves the whole run on the normal path (one interpreter start, about the cost of importing torch).
The worker is in its own session, so a terminal's Ctrl-C reaches only the CLI, which kills it and stops; a
KeyboardInterrupt inside the worker can only come from the code under test, and is an `error` row there.
Limits: the worker's pipe is open to the code under test, which runs with the user's rights; this guards against
implementations that exit, crash, hang or mutate their inputs, not against one written to forge the channel.
"""
import json
import os
import selectors
import signal
import subprocess
import sys
import time

TIMEOUT_S = 60.0
IMPORT_MIN_S = 30.0  # importing --apply may take longer than a case (transformers: seconds on a busy machine)
MAX_STOPS = 3
BOOT_S = 600.0  # the worker's own start (torch, the golden file): a safety limit only


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
        try:
            out = sys.__stderr__.fileno()  # the implementation's prints go to stderr: stdout holds the table
        except (AttributeError, OSError, ValueError):
            out = subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "harness.conformance.isolate", str(write),
                 json.dumps({**spec, "cases": case_ids})],
                pass_fds=(write,), stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                start_new_session=True)
        finally:
            os.close(write)
        self.pipe = os.fdopen(read, "rb", buffering=0)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.pipe, selectors.EVENT_READ)
        self.buf = b""

    def next(self, limit):
        """The worker's next message (a dict) within limit s; raises _Ended."""
        deadline = time.monotonic() + limit
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sel.select(left):
                raise _Ended(f"timeout after {limit:g} s", timeout=True)
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
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        self.proc.wait()
        self.sel.close()
        self.pipe.close()


def run(spec, echo=None, timeout=TIMEOUT_S):
    """(rows, messages) of the cases spec selects, run in worker processes; ValueError (one line) where --apply or
    --frequencies cannot be imported or called. spec: apply, frequencies, calling (conventions.Calling's fields,
    defaults filled in), dtype, rope_types."""
    from harness.conformance import golden
    from harness.conformance import run as R

    def say(line):
        msgs.append(line)
        if echo:
            echo(line)

    case_list, _ = golden.load()
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
                    current = next(c for c in todo if c["id"] == msg["case"])
                    continue
                if msg["event"] != "done" or current is None or msg["case"] != current["id"]:
                    raise _Ended("its channel to the suite broke (out of order)")
                rows += msg["rows"]
                for line in msg["msgs"]:
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
    channel = os.fdopen(fd, "w", buffering=1)

    def send(**msg):
        channel.write(json.dumps(msg) + "\n")
        channel.flush()

    from harness.conformance import adapters, golden
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
        rows, msgs = R.run_one(fn, calling, by_id[cid], data, spec["dtype"], freq)
        send(event="done", case=cid, rows=rows, msgs=msgs)
    send(event="end")


if __name__ == "__main__":
    _worker(int(sys.argv[1]), json.loads(sys.argv[2]))
    sys.stdout.flush()
    os._exit(0)  # no atexit or thread of the code under test runs after the last case
