# Run on a GPU machine from the repo root: PYTHONPATH=. python harness/bench/probes/probe3.py host|step|kernel|overhead 1024
# (liger-kernel and flash-attn rotary importable for `kernel`). Output of 2026-11-27 on an H200: probe3.txt.
"""GPU probe 3: where RoPE's step overhead goes (host cost per call, syncs), kernel variants' R (bthd storage)."""
import cProfile, io, os, pstats, sys, time, traceback, warnings
import torch, triton
import triton.language as tl
from types import SimpleNamespace
from harness.bench import kernel_bench as kb
from harness.bench import kernel_timing, overhead
from harness.rope import triton_rope as tr
from harness.rope.triton_rope import _heads
from harness.rope.apply import apply_rotary_qk
from harness.encodings.rope import Rope
PART = sys.argv[1]
dev = torch.device(os.environ.get("DEV", "cuda"))


def bthd(t):
    return torch.empty_like(t.transpose(1, 2), memory_format=torch.contiguous_format).copy_(t.transpose(1, 2)).transpose(1, 2)


def host_us(fn, n=100):
    fn(); fn(); torch.cuda.synchronize()
    torch.cuda._sleep(int(0.3 * 2e9))
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t = (time.perf_counter() - t0) / n
    torch.cuda.synchronize()
    return 1e6 * t


if PART == "host":
    q, k, cos, sin = kb.inputs(dict(b=8, hq=16, hk=16, t=2048, d=64), torch.bfloat16, "cuda")
    q, k = bthd(q), bthd(k)
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    bsz, hq, t, d = q.shape
    raw = lambda: tr._rope[(bsz * t,)](q, k, qo, ko, cos, sin, *q.stride(), *k.stride(), *qo.stride(), *ko.stride(),
        cos.stride(0), t, hq, k.shape[1], d, 32, 1.0, INTERLEAVED=False, HAS_K=True, COPY_TAIL=False,
        BLOCK_HQ=16, BLOCK_HK=16, BLOCK_R=32, BLOCK_TAIL=1)
    qg, kg = q.detach().clone().requires_grad_(), k.detach().clone().requires_grad_()
    g = (torch.randn_like(q), torch.randn_like(k))
    def fwdbwd(impl):
        def f():
            o = apply_rotary_qk(qg, kg, cos, sin, impl=impl)
            torch.autograd.backward(o, g)
        return f
    def nograd():
        with torch.no_grad():
            apply_rotary_qk(q, k, cos, sin, impl="triton")
    cases = [("q.add_(0) one launch", lambda: qo.add_(0)), ("empty_like x2", lambda: (torch.empty_like(q), torch.empty_like(k))),
             ("raw _rope[grid]", raw), ("tr.launch", lambda: tr.launch((q, k), (qo, ko), cos, sin, interleaved=False, sign=1.0)),
             ("apply_rotary_qk no_grad", nograd), ("apply_rotary_qk grad fwd", lambda: apply_rotary_qk(qg, kg, cos, sin, impl="triton")),
             ("fwd+bwd triton", fwdbwd("triton")), ("fwd+bwd eager", fwdbwd("eager")),
             ("autograd identity fwd+bwd", lambda: torch.autograd.backward((qg * 1, kg * 1), g))]
    for name, fn in cases:
        print(f"host {name:28s} {host_us(fn):8.1f} us/call", flush=True)
    pr = cProfile.Profile(); torch.cuda._sleep(int(0.3 * 2e9)); pr.enable()
    for _ in range(200):
        raw()
    pr.disable(); torch.cuda.synchronize()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(14); print(s.getvalue()[-3500:])

if PART == "step":
    a = SimpleNamespace(d_model=1024, heads=16, layers=8, batch=8, seq_len=2048, autocast="bf16")
    for name in ("nope", "rope"):
        fn = overhead.step_fn(name, {}, a, dev)
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        seen = {}
        torch.cuda.set_sync_debug_mode(1)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            old = warnings.showwarning
            fn()
        torch.cuda.set_sync_debug_mode(0)
        for x in w:
            seen[str(x.message)[:90] + f" @{x.filename.split('/')[-1]}:{x.lineno}"] = 1
        print(f"==== {name}: {len(w)} sync warnings:", *seen, sep="\n  ")
        torch.cuda.synchronize()
        t0 = time.perf_counter(); fn(); th = time.perf_counter() - t0; torch.cuda.synchronize(); tw = time.perf_counter() - t0
        print(f"{name} host enqueue of one step {1e3 * th:.2f} ms, wall {1e3 * tw:.2f} ms")
        pr = cProfile.Profile(); pr.enable()
        for _ in range(3):
            fn()
        torch.cuda.synchronize(); pr.disable()
        s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22); print(s.getvalue()[-5000:])


@triton.jit
def _rope_bt(q, k, qo, ko, cos, sin,
             sqb, sqh, sqt, sqd, skb, skh, skt, skd, sob, soh, sot, sod, spb, sph, spt, spd,
             sct, T, HQ, HK, D, R2, sign,
             INTERLEAVED: tl.constexpr, HAS_K: tl.constexpr, COPY_TAIL: tl.constexpr,
             BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_TAIL: tl.constexpr,
             BT: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    nt = T // BT
    b, t0 = pid // nt, (pid % nt) * BT
    j = tl.arange(0, BLOCK_R)
    jm = j < R2
    for i in tl.static_range(BT):
        t = t0 + i
        c = tl.load(cos + t * sct + j, mask=jm, other=0.0)
        s = tl.load(sin + t * sct + j, mask=jm, other=0.0) * sign
        _heads(q + b * sqb + t * sqt, qo + b * sob + t * sot, sqh, sqd, soh, sod, HQ, j, jm, c, s, D, 2 * R2,
               INTERLEAVED, BLOCK_HQ, BLOCK_R, COPY_TAIL, BLOCK_TAIL)
        _heads(k + b * skb + t * skt, ko + b * spb + t * spt, skh, skd, sph, spd, HK, j, jm, c, s, D,
               2 * R2, INTERLEAVED, BLOCK_HK, BLOCK_R, COPY_TAIL, BLOCK_TAIL)


def variant(q, k, cos, sin, inter, bt, w):
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    bsz, hq, t, d = q.shape
    r2 = cos.shape[-1]
    args = (q, k, qo, ko, cos, sin, *q.stride(), *k.stride(), *qo.stride(), *ko.stride(), cos.stride(0), t, hq,
            k.shape[1], d, r2, 1.0)
    kw = dict(INTERLEAVED=inter, HAS_K=True, COPY_TAIL=False, BLOCK_HQ=triton.next_power_of_2(hq),
              BLOCK_HK=triton.next_power_of_2(k.shape[1]), BLOCK_R=triton.next_power_of_2(r2), BLOCK_TAIL=1, num_warps=w)
    if bt == 1:
        return (lambda: tr._rope[(bsz * t,)](*args, **kw)), qo, ko
    return (lambda: _rope_bt[(bsz * t // bt,)](*args, BT=bt, **kw)), qo, ko


def R(kernel, copy, q, k, cos, sin):
    tk, tc = kernel_timing._alternate_cuda(kernel, copy, 0.4, 5, 160)  # kernel_bench's when this ran
    scale = kb.rope_bytes(q, k, cos, sin) / (2 * (q.nbytes + k.nbytes))
    return kb.quantile(tc, 0.2) / kb.quantile(tk, 0.2) * scale, kb.quantile(tk, 0.2)


if PART == "kernel":
    S = dict(b=8, hq=32, hk=8, t=4096, d=128)
    for dt, lay in (("bfloat16", "half"), ("bfloat16", "interleaved"), ("float32", "half")):
        q, k, cos, sin = kb.inputs(S, kb.DTYPES[dt], "cuda")
        q, k = bthd(q), bthd(k)
        inter = lay == "interleaved"
        ref = None
        for bt, w in ((1, 4), (2, 4), (4, 4), (4, 8), (8, 8), (1, 4)):
            f, qo, ko = variant(q, k, cos, sin, inter, bt, w)
            f()
            if ref is None:
                ref = (qo.clone(), ko.clone())
            same = torch.equal(ref[0], qo) and torch.equal(ref[1], ko)
            r, tk = R(f, kb.copy_fn(q, k), q, k, cos, sin)
            print(f"kernel {dt:9s} {lay:11s} BT{bt} w{w}  R {r:.3f}  {1e3 * tk:.4f} ms  same={same}", flush=True)
        if dt == "bfloat16" and lay == "half":
            for p in ("liger", "flash_attn"):
                try:
                    qq, kk, cc, ss = kb.inputs(S, kb.DTYPES[dt], "cuda")
                    r, tk = R(kb.kernel_fn(p, "fwd", qq, kk, cc, ss, lay), kb.copy_fn(qq, kk), qq, kk, cc, ss)
                    print(f"kernel {dt:9s} {lay:11s} {p}  R {r:.3f}  {1e3 * tk:.4f} ms", flush=True)
                except Exception as e:
                    print(p, "skip", type(e).__name__, str(e)[:100])
        del q, k
        torch.cuda.empty_cache()

if PART == "overhead":
    args = (f"--device cuda --layers 8 --d-model {sys.argv[2]} --heads 16 --seq-len 2048 --batch 8 --autocast bf16 "
            f"--rounds 5").split()
    overhead.main(args)
    from harness.rope import rotary_table
    cache = {}

    def cached(self, pos, dtype):  # the device inv_freq kept: no H2D copy (a stream sync) and no CPU work per forward
        key = (pos.device, dtype)
        if key not in cache:
            inv, af = self.frequencies(None)
            work = torch.promote_types(inv.dtype, dtype)
            cache[key] = (inv.to(pos.device, work), af, work)
        inv, af, work = cache[key]
        return rotary_table(inv, pos, af, dtype=work)
    Rope._table = cached
    overhead.VARIANTS = overhead.VARIANTS[:2]
    print("---- with the device inv_freq cached")
    overhead.main(args)
