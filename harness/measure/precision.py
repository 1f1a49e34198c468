"""Kernel-level precision study of RoPE against an fp64 reference, as tidy rows.

Row conventions (the run rows' columns, harness/results/, where they apply; the runner adds run_id,
sweep, torch, git_sha, time):
- `pipeline` is the pipeline name (conf/precision/<name>.yaml) on the rows of a RoPE precision pipeline
  and None on every other row: it, not the encoding, tells the pipeline rows apart (their `encoding` is
  rope, and so is that of the dtype-level collision rows).
- `protocol` is the pipeline name for RoPE pipeline rows, `positions` for the dtype-level collision rows,
  and `cast`/`autocast` for the bias encodings and xPos (precision_bias.py).
- `dtype` is the activations dtype (what q/k are held in); `params` is JSON: the pipeline's stage dtypes
  and the measurement's knobs (distance, key, threshold...).
- `eval_len` is the exclusive upper end of a log-spaced window of the metric's x-axis: windows are
  [0, 16), [16, 32), ..., [max_len/2, max_len). The x-axis is the absolute position (phase, table,
  rotation, collisions), the relative distance (logit_err, bias_err) or the offset (shift metrics,
  which aggregate over all offsets below eval_len). A window's value is its max (std for shift_variance).
"""
import argparse
import json
import math

import torch

from harness.measure.precision_bias import bias_rows, xpos_rows
from harness.measure.precision_layers import member_rows
from harness.measure.precision_pipelines import (DTYPES, MAX_LEN, REFERENCE, phase_error, pipeline_names,
                                                 resolve, rotate, round_tf32, row, sample_positions, table,
                                                 window_rows, windows)

__all__ = ["bias_rows", "collision_rows", "logit_rows", "phase_error", "phase_rows", "precision_report_rows",
           "rotation_rows", "safe_length", "windows", "xpos_rows"]


def _ids(p, head_dim):
    """The identifying fields of a pipeline's rows."""
    return dict(pipeline=p.name, protocol=p.name, dtype=p.activations, head_dim=head_dim, **p.dtypes())


def phase_rows(pipelines=None, *, head_dim=128, base=10000.0, max_len=MAX_LEN, thresholds=(0.1, 1.0)):
    """Item 1: phase error (rad) per log window, and the first position where it exceeds each threshold."""
    out, pos, edges = [], torch.arange(max_len), windows(max_len)
    for p in map(resolve, pipelines or pipeline_names()):
        err = phase_error(p, head_dim, base, pos)  # (N,)
        out += window_rows(err, edges, "phase_err_rad", "rad", **_ids(p, head_dim))
        for t in thresholds:
            over = (~(err <= t)).nonzero()  # NaN counts as over
            # NaN: never exceeded below max_len
            onset = float(over[0]) if len(over) else math.nan
            out.append(row("phase_err_onset", onset, "position", eval_len=max_len, threshold=t,
                           **_ids(p, head_dim)))
    return out


def _rel_err(y, ref):
    """Per position relative L2 error: (T, D) x 2 -> (T,)."""
    return (y.double() - ref).norm(dim=-1) / ref.norm(dim=-1)


def rotation_rows(pipelines=None, *, head_dim=128, base=10000.0, max_len=MAX_LEN, per_window=2048, seed=0):
    """Item 2: cos/sin table error, and rotated-vector relative error: table only (the rotation in fp64
    with the pipeline's table) and full pipeline (activations in, rotation dtype, activations out).
    Windows wider than per_window are sampled (seeded random positions); the max is over the sample."""
    out, edges = [], windows(max_len)
    pos = sample_positions(edges, per_window, seed)  # (N,)
    x = torch.randn(len(pos), head_dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    cos64, sin64 = table(REFERENCE, pos, head_dim, base)  # (N, d/2)
    for p in map(resolve, pipelines or pipeline_names()):
        ids = dict(_ids(p, head_dim), per_window=per_window)
        cos, sin = table(p, pos, head_dim, base)  # (N, d/2)
        terr = torch.maximum((cos.double() - cos64).abs(), (sin.double() - sin64).abs()).amax(-1)
        out += window_rows(terr, edges, "table_err", "abs", at=pos, **ids)
        xa = x.to(DTYPES[p.activations]).double()  # the same quantized input for pipeline and reference
        ref = rotate(REFERENCE, xa, cos64, sin64)  # (N, D)
        only = rotate(REFERENCE, xa, cos.double(), sin.double())
        out += window_rows(_rel_err(only, ref), edges, "rot_rel_err_table", "rel", at=pos, **ids)
        out += window_rows(_rel_err(rotate(p, xa, cos, sin), ref), edges, "rot_rel_err", "rel", at=pos, **ids)
    return out


def _rotated(p, v, positions, head_dim, base):
    """The vector v (D,) rotated at each position (N,) by pipeline p: (N, D) in fp64."""
    cos, sin = table(p, positions, head_dim, base)
    return rotate(p, v.expand(len(positions), -1), cos, sin).double()


def logit_rows(pipelines=None, *, head_dim=128, base=10000.0, max_len=MAX_LEN, distances=(1, 64, 4096),
               n_pairs=2, key_scale=50.0, per_window=1024, seed=0):
    """Items 3-4 for seeded random unit-variance (q, k) pairs (max over pairs), logit = q.k / sqrt(D).

    logit_err: |logit - fp64 logit| of q at distance d from k at position 0, per window of d.
    Shift metrics (AnchorAttention, arXiv 2411.13476, Eq. 3: the logit must depend on m - n only): the
    same (q, k) at fixed distance d at offsets o < eval_len (k at o, q at o + d); shift_variance = std of
    the logit over those offsets, shift_max_err = max |logit(o) - fp64 logit|. Repeated with k scaled by
    key_scale (one large-norm key, like an attention-sink token): rounding error grows with the norm.
    Offsets and distances in windows wider than per_window are sampled (seeded random).
    """
    out, edges = [], windows(max_len)
    o = sample_positions(edges, per_window, seed)  # (n,) offsets and distances; o[0] = 0
    d_t = torch.tensor(distances)
    q_pos = torch.cat((o, *(o + d for d in distances), d_t))  # q at d (k at 0), at o + d, and at each d
    gen = torch.Generator().manual_seed(seed)
    pairs = [torch.randn(2, head_dim, generator=gen, dtype=torch.float64) for _ in range(n_pairs)]
    n, scale = len(o), 1 / math.sqrt(head_dim)
    for p in map(resolve, pipelines or pipeline_names()):
        act, errs, shift = DTYPES[p.activations], [], {}
        for q, k in pairs:
            qa = q.to(act).double()
            rq, rq64 = _rotated(p, qa, q_pos, head_dim, base), _rotated(REFERENCE, qa, q_pos, head_dim, base)
            for key, norm in (("unit", 1.0), ("large_norm", key_scale)):
                ka = (k * norm).to(act).double()
                rk, rk64 = _rotated(p, ka, o, head_dim, base), _rotated(REFERENCE, ka, o, head_dim, base)
                # dot products in fp64: only the positional pipeline's error is measured
                truth = rq64[-len(distances):] @ rk64[0] * scale  # (len(distances),) the offset-0 logits
                if key == "unit":
                    errs.append((rq[:n] @ rk[0] - rq64[:n] @ rk64[0]).abs() * scale)  # (n,) per distance o
                for i, d in enumerate(distances):
                    got = (rq[(i + 1) * n:(i + 2) * n] * rk).sum(-1) * scale  # (n,) per offset o
                    shift.setdefault((key, d), []).append((got, truth[i]))
        out += window_rows(torch.stack(errs).amax(0), edges, "logit_err", "logit", at=o, **_ids(p, head_dim))
        for (key, d), runs in shift.items():
            ids = dict(_ids(p, head_dim), distance=d, key=key, key_scale=norm if key != "unit" else 1.0)
            # max over pairs: stack the per-pair windows (a NaN, a lost position, propagates)
            for metric, red, vals in (("shift_variance", "std", [g for g, _ in runs]),
                                      ("shift_max_err", "cummax", [(g - t).abs() for g, t in runs])):
                per_pair = [window_rows(v, edges, metric, "logit", reduce=red, at=o, **ids) for v in vals]
                for rows in zip(*per_pair):
                    value = torch.tensor([r["value"] for r in rows]).amax()
                    out.append({**rows[0], "value": float(value)})
    return out


def _held(positions, dtype):
    """Integer positions as one dtype holds them (tf32: fp32 rounded to TF32's mantissa)."""
    return round_tf32(positions.float()) if dtype == "tf32" else positions.to(DTYPES[dtype])


def collision_rows(pipelines=None, *, dtypes=("fp16", "bf16", "tf32", "fp32"), head_dim=128, base=10000.0,
                   max_len=MAX_LEN):
    """Item 5: share of adjacent positions (p, p + 1) mapped to the same value, per window of p.

    collision_rate: the position itself held in a dtype (protocol `positions`; fp16 overflows to inf
    past 65504, and inf == inf counts). table_collision_rate: per pipeline, adjacent positions whose
    whole cos/sin row is identical, so attention cannot tell them apart; a non-finite row counts.
    """
    out, pos, edges = [], torch.arange(max_len + 1), windows(max_len)
    for dt in dtypes:
        held = _held(pos, dt)
        same = (held[1:] == held[:-1]).double()  # (max_len,): pair (p, p + 1) at index p
        out += window_rows(same, edges, "collision_rate", "share", reduce="mean", protocol="positions", dtype=dt)
    for p in map(resolve, pipelines or pipeline_names()):
        cos, sin = table(p, pos, head_dim, base)
        tab = torch.cat((cos, sin), dim=-1)  # (N + 1, d)
        lost = ~tab.isfinite().all(-1)
        same = ((tab[1:] == tab[:-1]).all(-1) | lost[1:] | lost[:-1]).double()
        out += window_rows(same, edges, "table_collision_rate", "share", reduce="mean", **_ids(p, head_dim))
    return out


def safe_length(rows, threshold, metric="phase_err_rad"):
    """Per series (encoding, protocol, dtype, head_dim, params, pipeline) of window rows of `metric`: the
    length L below which every window's value is <= threshold. A NaN value counts as over. When no window
    fails, L is the last window's end and params say censored: true (safe at least that far)."""
    rows = rows.to_dict("records") if hasattr(rows, "to_dict") else list(rows)
    series = {}
    for r in rows:
        if r["metric"] == metric and r.get("eval_len") is not None:
            pipeline = r.get("pipeline") if isinstance(r.get("pipeline"), str) else None  # NaN from a frame
            key = (r["encoding"], r["protocol"], r["dtype"], r.get("head_dim"), r["params"], pipeline)
            series.setdefault(key, []).append((r["eval_len"], r["value"]))
    out = []
    for (encoding, protocol, dtype, head_dim, params, pipeline), points in sorted(series.items(), key=str):
        points.sort()
        safe, censored = 0, True
        for end, value in points:
            if not value <= threshold:  # NaN fails too
                censored = False
                break
            safe = end
        out.append(row("safe_length", safe, "position", protocol=protocol, dtype=dtype, encoding=encoding,
                       head_dim=head_dim, pipeline=pipeline, **json.loads(params), of=metric,
                       threshold=threshold, censored=censored))
    return out


# (metric, threshold) pairs summarised by safe_length in the report; thresholds in the metric's unit
# (bias_err is absolute: far keys' large biases round coarsely yet harmlessly; bias_collision_rate is the
# share of adjacent distances attention can no longer order)
SAFE_THRESHOLDS = (("phase_err_rad", 0.1), ("phase_err_rad", 1.0), ("logit_err", 0.1), ("shift_max_err", 0.1),
                   ("bias_err", 0.1), ("bias_collision_rate", 0.01), ("xpos_scale_overflow", 0.0))


def precision_report_rows(*, head_dim=128, base=10000.0, max_len=MAX_LEN, pipelines=None):
    """Every kernel-level row for the default grid (items 1-6), the per-layer policies' rotating members
    (precision_layers), plus the safe_length summaries."""
    kw = dict(head_dim=head_dim, base=base, max_len=max_len)
    rows = (phase_rows(pipelines, **kw) + rotation_rows(pipelines, **kw) + logit_rows(pipelines, **kw)
            + collision_rows(pipelines, **kw) + bias_rows(max_len=max_len) + xpos_rows(**kw)
            + member_rows(max_len=max_len))
    return rows + [r for m, t in SAFE_THRESHOLDS for r in safe_length(rows, t, m)]


def main(argv=None):
    """CLI: print the safe-length table (phase error <= --threshold rad) and optionally write all rows."""
    ap = argparse.ArgumentParser(prog="python -m harness.measure.precision", description=main.__doc__)
    ap.add_argument("--max-len", type=int, default=MAX_LEN)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--base", type=float, default=10000.0)
    ap.add_argument("--out", help="write every row to this .csv or .parquet")
    args = ap.parse_args(argv)
    import pandas as pd

    df = pd.DataFrame(precision_report_rows(head_dim=args.head_dim, base=args.base, max_len=args.max_len))
    if args.out:
        (df.to_parquet if args.out.endswith(".parquet") else df.to_csv)(args.out, index=False)
    safe = df[df.metric == "safe_length"].copy()
    meta = safe.params.map(json.loads)
    # shift rows: ordinary keys at distance 1 (offsets, so a long distance starts past the safe positions)
    safe = safe[meta.map(lambda m: m.get("key", "unit") == "unit" and m.get("distance", 1) == 1)]
    meta = safe.params.map(json.loads)
    safe["of"] = meta.map(lambda m: f"{m['of']}<={m['threshold']:g}" + (" (d=1)" if "distance" in m else ""))
    # '+' = safe to the end of the grid (censored)
    safe["L"] = safe.value.where(~meta.map(lambda m: m["censored"]), safe.value + 0.5)
    for of_pipeline, index in ((True, "protocol"), (False, ["encoding", "protocol", "dtype"])):
        part = safe[safe.pipeline.notna() == of_pipeline]
        table_ = part.pivot_table("L", index, "of", aggfunc="min")
        print(table_.map(lambda v: "" if v != v else f"{v:.0f}" + ("+" if v % 1 else "")).to_string(), "\n")

if __name__ == "__main__":
    main()
