# Run on a GPU machine from the repo root: PYTHONPATH=. python harness/bench/probes/probe4.py gaps|variants 1024
# Output of 2026-11-27 on an H200: probe4.txt.
"""GPU probe 4: where the GPU idles in a RoPE training step (profiler gaps), and step-time variants."""
import json, os, sys, time, torch
from types import SimpleNamespace
from torch.profiler import profile, ProfilerActivity
from harness import encodings as E
from harness.bench import overhead
from harness.encodings.rope import Rope
from harness.rope import rotary_table
PART = sys.argv[1]
dev = torch.device("cuda")
_cache = {}


class Ident(Rope):  # the table made (its H2D copy included), no rotation
    def rotate(self, q, k, pos):
        self.table(pos, q.dtype)
        return q, k


class IdentNoTable(Rope):
    def rotate(self, q, k, pos):
        return q, k


class Clone(Rope):  # the table made, q and k copied instead of rotated (same bytes, fresh outputs)
    def rotate(self, q, k, pos):
        self.table(pos, q.dtype)
        return q.clone(), k.clone()


class Cached(Rope):  # the device inv_freq kept: no H2D copy (a stream sync) per forward
    def _table(self, pos, dtype):
        key = (pos.device, dtype)
        if key not in _cache:
            inv, af = self.frequencies(None)
            work = torch.promote_types(inv.dtype, dtype)
            _cache[key] = (inv.to(pos.device, work), af, work)
        inv, af, work = _cache[key]
        return rotary_table(inv, pos, af, dtype=work)


EXTRA = {"ident": Ident, "ident_notable": IdentNoTable, "clone": Clone, "cached": Cached}


class Shim:
    @staticmethod
    def build(name, **kw):
        if name in EXTRA:
            return EXTRA[name](head_dim=kw["head_dim"])
        return E.build(name, **kw)


overhead.encodings = Shim
a = SimpleNamespace(d_model=int(sys.argv[2]), heads=16, layers=8, batch=8, seq_len=2048, autocast="bf16",
                    warmup=3, rounds=7, steps=5, device="cuda")

if PART == "variants":
    overhead.VARIANTS = [(n, n, {}) for n in ("nope", "rope", "ident", "ident_notable", "clone", "cached")]
    for label, r in overhead.measure(a).items():
        print(f"d_model {a.d_model} {label:14s} step {1e3 * r['step_s']:8.3f} ms  overhead {100 * r['overhead_vs_nope']:+6.2f}%"
              f"  (rounds {1e3 * r['spread'][0]:.3f}-{1e3 * r['spread'][1]:.3f})", flush=True)

if PART == "gaps":
    for name in ("nope", "rope", "cached", "clone"):
        fn = overhead.step_fn(name, {}, a, dev)
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True) as prof:
            fn()
            torch.cuda.synchronize()
        path = f"/tmp/trace_{name}.json"
        prof.export_chrome_trace(path)
        ev = json.load(open(path))["traceEvents"]
        ker = sorted((e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")), key=lambda e: e["ts"])
        launch = {e["args"].get("correlation"): e for e in ev if e.get("cat") == "cuda_runtime" and "args" in e}
        py = [e for e in ev if e.get("cat") == "python_function"]
        busy = sum(e["dur"] for e in ker)
        span = ker[-1]["ts"] + ker[-1]["dur"] - ker[0]["ts"]
        gaps = []
        for p, e in zip(ker, ker[1:]):
            g = e["ts"] - (p["ts"] + p["dur"])
            if g > 15:
                l = launch.get(e["args"].get("correlation"))
                where = ""
                if l:
                    enc = [x for x in py if x["ts"] <= l["ts"] <= x["ts"] + x["dur"] and "harness" in x["name"]]
                    enc.sort(key=lambda x: x["dur"])
                    where = " < ".join(x["name"].split("harness/")[-1][:50] for x in enc[:3])
                    where = f"launch->start {e['ts'] - l['ts']:.0f}us; {where}"
                gaps.append((g, e["name"][:50], where))
        print(f"==== {name}: kernels {len(ker)}, GPU busy {busy / 1e3:.2f} ms of span {span / 1e3:.2f} ms, "
              f"gaps>15us {len(gaps)} sum {sum(g for g, _, _ in gaps) / 1e3:.2f} ms; all gaps sum {(span - busy) / 1e3:.2f} ms")
        for g, n, w in sorted(gaps, reverse=True)[:12]:
            print(f"  gap {g:7.0f} us before {n:50s} {w}")
