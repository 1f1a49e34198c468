"""Peak memory and time of one causal attention forward with an encoding's bias, through SDPA (the (H, T, T)
bias the encoding builds, as a mask) and through FlexAttention (harness.flex: an (H, T) distance table in a
compiled kernel). CPU, no gradient, B 1, H 4, D 32, fp32, positions 0..T-1:

  python -m harness.bench.flex_bench --out results/flex/cpu.csv [--lens 1024 ...] [--encodings alibi rnope_swa:0]

Each call starts from q, k, v and positions, so the bias (SDPA) or the table and BlockMask (flex) are part of it;
the rotation of a rotary member is not (both paths share it). Memory: measure.memory.peak_extra_bytes (the
profiler's allocator counter, exact for tensor memory) of one call after a warm-up call (flex compiles once
per length there); time: the median of timing.seconds_per_call. An SDPA length whose predicted peak (4x the
peak at the previous length) exceeds SAFE_FRACTION of the memory available, or whose allocation fails, is a NaN
row with its reason. Tidy rows: encoding, layer, path, T, metric, value, unit, repeats, nan_reason."""
import argparse
import math
import pathlib
import sys

import pandas as pd
import torch

from harness import attention
from harness.measure import timing
from harness.encodings import ENCODINGS as ENCODING_NAMES, build
from harness.measure.memory import peak_extra_bytes

B, H, D = 1, 4, 32
LENS = (1024, 2048, 4096, 8192, 16384)
ENCODINGS = ("alibi", "t5", "rnope_swa:0")  # name[:layer]: a per-layer policy's member (its Windowed layer)
SAFE_FRACTION = 0.6  # of MemAvailable: the machine is shared, so an SDPA length that would crowd it is skipped


def repeats(T):
    """Timed calls per length: the longest SDPA calls take tens of seconds on CPU."""
    return 5 if T <= 2048 else 3 if T <= 4096 else 1


def available_bytes():
    """MemAvailable from /proc/meminfo (Linux), else None (no guard)."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration):
        return None


def paths(enc, T):
    """{path: zero-argument call} of one attention forward at length T with encoding enc's bias."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, T, D, generator=g) for _ in range(3))
    pos = torch.arange(T)
    q, k = attention.rotate(enc, q, k, pos)
    return {"sdpa": lambda: attention.softmax_attention(q, k, v, attention.positions_bias(enc, q, pos, pos)),
            "flex": lambda: attention.flex_attention(q, k, v, enc, pos)}


def measure(enc, path, fn, T, predicted=None):
    """(rows of this path at T, its peak bytes or None)."""
    base = dict(path=path, T=T, repeats=repeats(T), nan_reason=None)
    avail = available_bytes()
    reason = None
    if predicted is not None and avail is not None and predicted > SAFE_FRACTION * avail:
        reason = (f"predicted peak {predicted / 2**30:.1f} GiB (4x the previous length's) > {SAFE_FRACTION} of "
                  f"the {avail / 2**30:.1f} GiB available")
    else:
        try:
            with torch.no_grad():
                if path == "flex":
                    fn()  # compiles at a new length
                peak = peak_extra_bytes(fn)
                secs = timing.median(timing.seconds_per_call(fn, repeats=repeats(T), warmup=0))
        except RuntimeError as e:  # the CPU allocator's "can't allocate memory"; anything else is raised
            if "allocate" not in str(e):
                raise
            reason = str(e).splitlines()[0]
    if reason is not None:
        return [{**base, "metric": m, "value": math.nan, "unit": u, "nan_reason": reason}
                for m, u in (("peak_extra_bytes", "bytes"), ("s_per_call", "s"))], None
    return [{**base, "metric": "peak_extra_bytes", "value": float(peak), "unit": "bytes"},
            {**base, "metric": "s_per_call", "value": secs, "unit": "s"}], peak


def run(encodings=ENCODINGS, lens=LENS):
    rows = []
    for spec in encodings:
        name, _, layer = spec.partition(":")
        enc = build(name, d_model=H * D, n_heads=H, head_dim=D).at(int(layer or 0))
        why = attention.flex_unsupported(enc)
        if why:
            raise ValueError(f"{spec}: no FlexAttention path ({why})")
        last = {}
        for T in sorted(lens):
            for path, fn in paths(enc, T).items():
                prev = last.get(path)
                predicted = prev[1] * (T / prev[0]) ** 2 if prev else None
                got, peak = measure(enc, path, fn, T, predicted)
                rows += [{"encoding": name, "layer": int(layer or 0), **r} for r in got]
                last[path] = (T, peak) if peak is not None else None
                why = f"  ({got[0]['nan_reason']})" if peak is None else ""
                print(f"{spec:14s} T {T:6d} {path:5s} " + "  ".join(
                    f"{r['metric']} {r['value']:.4g}" for r in got) + why, flush=True)
    return pd.DataFrame(rows, columns=["encoding", "layer", "path", "T", "metric", "value", "unit", "repeats",
                                       "nan_reason"])


def summary(df):
    """One line per (encoding, T): MiB and seconds of both paths and the flex / sdpa ratios."""
    wide = df.pivot_table(index=["encoding", "layer", "T"], columns=["metric", "path"], values="value",
                          dropna=False)
    out = pd.DataFrame({"sdpa_MiB": wide[("peak_extra_bytes", "sdpa")] / 2**20,
                        "flex_MiB": wide[("peak_extra_bytes", "flex")] / 2**20,
                        "mem_flex/sdpa": wide[("peak_extra_bytes", "flex")] / wide[("peak_extra_bytes", "sdpa")],
                        "sdpa_s": wide[("s_per_call", "sdpa")], "flex_s": wide[("s_per_call", "flex")],
                        "time_flex/sdpa": wide[("s_per_call", "flex")] / wide[("s_per_call", "sdpa")]})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/flex/cpu.csv")
    ap.add_argument("--lens", type=int, nargs="+", default=list(LENS))
    ap.add_argument("--encodings", nargs="+", default=list(ENCODINGS), help="name or name:layer")
    args = ap.parse_args(argv)
    try:  # the arguments, before any work: lengths, names, and that each has a FlexAttention path
        if any(T < 1 for T in args.lens):
            raise ValueError(f"--lens must be >= 1, got {args.lens}")
        for spec in args.encodings:
            name, _, layer = spec.partition(":")
            if name not in ENCODING_NAMES:
                raise ValueError(f"unknown encoding {name!r}; expected one of {sorted(ENCODING_NAMES)}")
            if layer and not layer.isdigit():
                raise ValueError(f"{spec}: the layer after ':' must be an integer >= 0")
            why = attention.flex_unsupported(build(name, d_model=H * D, n_heads=H, head_dim=D).at(int(layer or 0)))
            if why:
                raise ValueError(f"{spec}: no FlexAttention path ({why})")
    except ValueError as e:
        print(f"flex_bench: error: {e}", file=sys.stderr)
        return 2
    df = run(args.encodings, args.lens)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(out, index=False)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(summary(df).round(4).to_string())
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
