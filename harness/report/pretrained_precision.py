"""The pretrained report's precision table: each RoPE precision pipeline against the fp32 pipeline on the same
windows (rows of `study=precision`, harness.pretrained.study.precision_rows)."""
from harness import stats
from harness.report.bounds import checked


def precision_lines(d):
    """Markdown: per corpus and pipeline, mean KL to the fp32 pipeline in three position ranges [percentile
    bootstrap 95% over windows: KL is positive and skewed, a t interval runs below 0], kl_safe_len and the PPL gap at
    the longest length (mean ± t half-width; n = windows)."""
    p = d[d.pipeline.notna()]
    if p.empty:
        return []
    out = ["| corpus | pipeline | KL, positions < 1024 | KL, 4096–8191 | KL, ≥ 8192 | kl_safe_len | PPL gap at "
           f"{int(p.eval_len.max())} |", "|---|---|---|---|---|---|---|"]
    for (corpus, name), g in p.groupby(["corpus", "pipeline"]):
        kl = g[g.metric == "kl_fp32"]

        def rng(lo, hi):  # per window: the mean KL over the log windows inside [lo, hi), weighted by width
            k = kl[(kl.pos_lo >= lo) & (kl.eval_len <= hi)]
            w = k.eval_len - k.pos_lo
            per = (k.value * w).groupby(k.seed).sum() / w.groupby(k.seed).sum()
            return checked("kl_fp32", stats.interval(per, method="bootstrap"))  # a t interval runs below 0
        safe = stats.interval(g[g.metric == "kl_safe_len"].value)  # printed as mean (min): no interval
        gap = stats.interval(g[(g.metric == "ppl_gap") & (g.eval_len == g.eval_len.max())].value)
        out.append(f"| {corpus} | {name} | {_kl(rng(0, 1024))} | {_kl(rng(4096, 8192))} | "
                   f"{_kl(rng(8192, 10 ** 9))} | {safe.mean:.0f} (min {g[g.metric == 'kl_safe_len'].value.min():.0f}) "
                   f"| {_sci(gap)} |")
    return out


def _sci(x):
    return "—" if x.n == 0 else f"{x.mean:.2e} ± {x.half:.1e}" if x.n > 1 else f"{x.mean:.2e}"


def _kl(x):
    return "—" if x.n == 0 else f"{x.mean:.2e} [{x.lo:.1e}, {x.hi:.1e}]" if x.n > 1 else f"{x.mean:.2e}"
