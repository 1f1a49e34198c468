# Run on a GPU machine from the repo root: PYTHONPATH=. python harness/bench/probes/probe.py (liger-kernel and
# flash-attn rotary importable). Output of 2026-11-27 on an H200: probe.txt.
"""GPU probe: R of our triton rope on both storages, variants, against liger and flash-attn (prefill_large)."""
import json, os, sys, torch, triton
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tile.py beside it
from harness.bench import kernel_bench as kb
from harness.rope import triton_rope as tr
import tile

S = dict(b=8, hq=32, hk=8, t=4096, d=128)
out = []


def R(kernel, copy, q, k, cos, sin):
    tk, tc = kb._alternate_cuda(kernel, copy, 0.5, 5, 200)
    scale = kb.rope_bytes(q, k, cos, sin) / (2 * (q.nbytes + k.nbytes))
    return kb.quantile(tc, 0.2) / kb.quantile(tk, 0.2) * scale, kb.quantile(tk, 0.2)


def bthd(t):
    return torch.empty_like(t.transpose(1, 2), memory_format=torch.contiguous_format).copy_(t.transpose(1, 2)).transpose(1, 2)


def triton_warps(q, k, cos, sin, lay, w):
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    bsz, hq, t, d = q.shape
    r2 = cos.shape[-1]
    def f():
        tr._rope[(bsz * t,)](q, k, qo, ko, cos, sin, *q.stride(), *k.stride(), *qo.stride(), *ko.stride(),
            cos.stride(0), t, hq, k.shape[1], d, r2, 1.0, INTERLEAVED=lay == "interleaved", HAS_K=True,
            COPY_TAIL=False, BLOCK_HQ=triton.next_power_of_2(hq), BLOCK_HK=triton.next_power_of_2(k.shape[1]),
            BLOCK_R=triton.next_power_of_2(r2), BLOCK_TAIL=1, num_warps=w)
    return f


def tiled(q, k, cos, sin, lay, bt, w):
    qo, ko = torch.empty_like(q), torch.empty_like(k)
    inter = lay == "interleaved"
    return lambda: (tile.rotate(q, cos, sin, inter, out=qo, block_t=bt, num_warps=w),
                    tile.rotate(k, cos, sin, inter, out=ko, block_t=bt, num_warps=w))


def row(name, dt, lay, mode, r, t):
    out.append(dict(name=name, dtype=dt, layout=lay, mode=mode, R=r, ms=1e3 * t))
    print(f"{name:28s} {dt:9s} {lay:11s} {mode:3s} R {r:.3f}  {1e3 * t:.3f} ms", flush=True)


for dt in ("bfloat16", "float32"):
    for lay in ("half", "interleaved"):
        q, k, cos, sin = kb.inputs(S, kb.DTYPES[dt], "cuda")
        q2, k2 = bthd(q), bthd(k)
        for mode in ("fwd", "bwd"):
            for name, (qq, kk) in (("triton bhtd", (q, k)), ("triton bthd", (q2, k2))):
                row(name, dt, lay, mode, *R(kb.kernel_fn("triton", mode, qq, kk, cos, sin, lay), kb.copy_fn(qq, kk), qq, kk, cos, sin))
            for p in ("liger", "flash_attn"):
                try:
                    row(p, dt, lay, mode, *R(kb.kernel_fn(p, mode, q, k, cos, sin, lay), kb.copy_fn(q, k), q, k, cos, sin))
                except Exception as e:
                    print(p, dt, lay, mode, "skip", type(e).__name__, str(e)[:80])
        for w in (2, 8, 16):
            row(f"triton bhtd warps{w}", dt, lay, "fwd", *R(triton_warps(q, k, cos, sin, lay, w), kb.copy_fn(q, k), q, k, cos, sin))
            row(f"triton bthd warps{w}", dt, lay, "fwd", *R(triton_warps(q2, k2, cos, sin, lay, w), kb.copy_fn(q2, k2), q2, k2, cos, sin))
        for bt in (4, 8, 16, 32):
            for w in (2, 4, 8):
                row(f"tile bhtd T{bt} w{w}", dt, lay, "fwd", *R(tiled(q, k, cos, sin, lay, bt, w), kb.copy_fn(q, k), q, k, cos, sin))
        del q, k, q2, k2
        torch.cuda.empty_cache()
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "probe.json"), "w"), indent=1)
