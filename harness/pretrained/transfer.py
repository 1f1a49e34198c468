"""Does the laptop study predict the real model? The eval-time RoPE extensions ranked on the laptop models (sweep
`extension`: model=tiny trained at 64 tokens, PPL at 2x and 4x the train length, n = seeds) and on a pretrained model
(sweep `pretrained`: bits per byte at the same ratio of evaluation length to trained context, n = windows).

Kendall tau-b between the two orders of the variants both have (harness.transfer.tau_interval: its interval comes
from the uncertainty of both mean vectors, seeds on one side and windows on the other, drawn independently), and, for every pair of variants, whether its order is established on
each side (paired 95% CI of the difference excludes 0) and, where it is on both, whether the two agree or flip."""
import json

import numpy as np
import pandas as pd

from harness import stats, transfer
from harness.measure.extension import SELF_SCALING
from harness.pretrained.rows import label
from harness.pretrained.variants import EXTENSIONS


def _params(df):
    return df.params.map(json.loads)


def laptop_table(df, ratio):
    """(seed x variant) PPL at `ratio` x the train length from sweep `extension`'s rope runs: each eval-time
    extension (no fine-tune) and `none`, the trained RoPE's own rows."""
    d = df[(df.sweep == "extension") & (df.metric == "ppl") & (df.protocol == "nonoverlapping")]
    d = d[d.eval_len == ratio * d.train_len]
    if d.empty:
        return pd.DataFrame()
    p = _params(d)
    keep = ~p.map(lambda q: "finetune_steps" in q)
    d = d[keep].assign(variant=p[keep].map(lambda q: q.get("extension", "none")))
    return stats.seed_table(d, "variant")


def _auto(extension, ratio):
    """The laptop extension sweep's factor `auto` at this ratio: 1 for none and the self-scaling types (dynamic
    NTK, harness.measure.extension.SELF_SCALING), else the ratio."""
    rope_type = EXTENSIONS[extension][1]
    return 1.0 if rope_type == "default" or rope_type in SELF_SCALING else float(ratio)


def real_table(df, ratio, corpus="pystdlib"):
    """(window x variant) bits per byte at `ratio` x the trained context, the harness's RoPE, factor = ratio
    (none and dynamic take 1)."""
    d = df[(df.metric == "bpb") & df.params.str.contains('"pretrained"')]
    d = d[d.eval_len == ratio * d.train_len]
    if d.empty:
        return pd.DataFrame()
    if d.model.nunique() > 1:
        raise ValueError(f"real_table needs the rows of one model; got {sorted(d.model.unique())}")
    p = _params(d)
    ok = p.map(lambda q: q.get("rope_impl") == "harness" and q.get("corpus") == corpus and q.get("pipeline") is None
               and q["factor"] == _auto(q["extension"], ratio))
    return stats.seed_table(d[ok].assign(variant=p[ok].map(lambda q: q["extension"])), "variant")


# Two variants equal by construction agree to this relative tolerance: runs of one variant made on two machines
# (another BLAS kernel) differ by about 2e-7 relative in bits per byte (results/pretrained/RUN.md); any difference
# two variants make is 1e-4 or more.
SAME_RTOL = 1e-6


def _same(table, a, b):
    """True when a and b are equal on every seed or window up to SAME_RTOL: one variant by construction (dynamic
    NTK at f x the trained length is static NTK with factor f)."""
    x, y = table[a].align(table[b], join="inner")
    return len(x) > 0 and bool(np.allclose(x, y, rtol=SAME_RTOL, atol=0))


def pairs(toy, real):
    """One row per pair (a, b) of shared variants: each side's paired a - b (lower is better on both) and the
    outcome: agree, flip, identical on both, or which side has not established the order."""
    cols = [c for c in toy.columns if c in set(real.columns)]
    out = []
    for i, a in enumerate(cols):
        for b in cols[i + 1:]:
            t, r = stats.paired(toy[a], toy[b]), stats.paired(real[a], real[b])
            if _same(toy, a, b) and _same(real, a, b):
                outcome = "identical on both"
            elif t.significant and r.significant:
                outcome = "agree" if (t.diff > 0) == (r.diff > 0) else "flip"
            else:
                outcome = "not established on " + " and ".join(
                    s for s, x in (("laptop", t), ("real", r)) if not x.significant)
            out.append(dict(a=a, b=b, laptop=t, real=r, outcome=outcome))
    return pd.DataFrame(out)


def tau(toy, real, seed=0):
    """harness.transfer.TauInterval of the two orders over the variants both tables have."""
    return transfer.tau_interval(toy, real, seed=seed)


# ---- at matched points: sweep `transfer` (the proxy, harness.rope.geometry) against the real model's rows

def proxy_rows(df, sweep="transfer"):
    """A transfer sweep's PPL rows (nonoverlapping, no fine-tune) as log2 PPL: bits per byte for sweep `transfer`
    (the laptop models bytes), bits per token for `transfer_tokens` (SmolLM2's tokens), so each compares with the
    real model's rows in one unit; with columns variant, base (the trained RoPE's: which geometry) and ratio
    (eval_len / train_len)."""
    d = df[(df.sweep == sweep) & (df.metric == "ppl") & (df.protocol == "nonoverlapping")]
    if d.empty:
        return d.assign(variant=[], base=[], ratio=[])
    p = _params(d)
    keep = ~p.map(lambda q: "finetune_steps" in q)
    d, p = d[keep], p[keep]
    return d.assign(value=np.log2(d.value), variant=p.map(lambda q: label(q.get("extension", "none"),
                                                                           q.get("factor", 1.0))),
                    base=p.map(lambda q: float(q["base"])), ratio=d.eval_len / d.train_len)


def proxy_table(rows, ratio, model, base):
    """(seed x variant) bits per byte of one laptop size (`model`) and geometry (`base`) at `ratio` x its train length."""
    d = rows[(rows.model == model) & (rows.base == base) & (rows.ratio == ratio)]
    return stats.seed_table(d, "variant") if len(d) else pd.DataFrame()


def matched_real_table(d, ratio, corpus="pystdlib", unit="byte"):
    """(window x variant) bits per byte (unit byte) or per token (unit token: log2 of its per-token PPL) of prepared
    real rows (harness.pretrained.rows.prepare: one model) at `ratio` x the trained context, every variant at the
    factor it was run at (labels as `label`)."""
    b = d[(d.metric == ("bpb" if unit == "byte" else "ppl")) & (d.rope_impl == "harness") & (d.corpus == corpus)
          & d.pipeline.isna()]
    b = b[b.eval_len == ratio * b.train_len]
    b = b if unit == "byte" else b.assign(value=np.log2(b.value))
    return stats.seed_table(b, "variant") if len(b) else pd.DataFrame()


def cells(rows, real, ratios=(1.5, 2)):
    """One row per (geometry base, laptop model, ratio) of the proxy rows: τ with its interval against the real
    table at that ratio (real: {ratio: window x variant}), the pair outcomes and n on both sides."""
    out = []
    for (base, model), _ in rows.groupby(["base", "model"]):
        for ratio in ratios:
            toy, r = proxy_table(rows, ratio, model, base), real.get(ratio, pd.DataFrame())
            if toy.empty or r.empty:
                continue
            t, pr = tau(toy, r), pairs(toy, r)
            out.append(dict(base=base, model=model, ratio=ratio, tau=t, pairs=pr, toy=toy, real=r,
                            **{k: int((pr.outcome == k).sum()) for k in ("agree", "flip")},
                            open=int(pr.outcome.str.startswith("not").sum())))
    return out
