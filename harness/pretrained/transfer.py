"""Does the laptop study predict the real model? The eval-time RoPE extensions ranked on the laptop models (sweep
`extension`: model=tiny trained at 64 tokens, PPL at 2x and 4x the train length, n = seeds) and on a pretrained model
(sweep `pretrained`: bits per byte at the same ratio of evaluation length to trained context, n = windows).

Kendall tau-b between the two orders of the variants both have (harness.transfer.tau_interval: its interval comes
from the uncertainty of both mean vectors, seeds on one side and windows on the other, drawn independently), and, for every pair of variants, whether its order is established on
each side (paired 95% CI of the difference excludes 0) and, where it is on both, whether the two agree or flip."""
import json

import pandas as pd

from harness import stats, transfer


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
               and q["factor"] in (1.0, float(ratio)))
    return stats.seed_table(d[ok].assign(variant=p[ok].map(lambda q: q["extension"])), "variant")


def _same(table, a, b):
    """True when a and b are equal on every seed or window: one variant by construction (dynamic NTK at f x the
    trained length is static NTK with factor f)."""
    x, y = table[a].align(table[b], join="inner")
    return len(x) > 0 and bool((x == y).all())


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
