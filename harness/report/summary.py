"""`## What to use`: per question the report's rows can answer, the best encoding and every one statistically tied
with it, with the interval, n (seeds) and the scale the answer holds at; and the README block generated from it
(`python -m harness.report RESULTS --readme README.md --write|--check`).

Questions: train length (the headline metric at 1x the train length), extrapolation (at the longest length),
long context (RULER's string match at the longest length, when measured), cost (train tokens/s, peak memory of a
train step). Best = best mean over seeds, printed with its 95% interval of the metric's kind (harness.report.bounds:
a geometric mean for perplexity, throughput and memory); tied = ranks.best_and_ties (the paired 95% t interval of the difference
to the best contains 0: the `†` of the report's tables). One answer per comparison group (task, budget, train
length): only variants trained the same way are paired. Scale: parameters (the model each run's config builds)
and training tokens (steps x batch x train length) from the runs' `.hydra/config.yaml`, else what the rows hold."""
import re
import sys
from pathlib import Path

import numpy as np
import yaml

from harness import ranks, results, stats
from harness.report import bounds
from harness.report.confidence import _signed, lengths, mains
from harness.report.tables import decimals, fmt_interval, lower_is_better

MiB = 2 ** 20
BLOCK = re.compile(r"(<!-- reference-summary: (\S+) -->\n)(.*?)(<!-- /reference-summary -->)", re.S)
LADDER = re.compile(r"(<!-- ladder-summary: (\S+) -->\n)(.*?)(<!-- /ladder-summary -->)", re.S)
LONG = (("ruler_all", "RULER string match (mean over depths)"),)  # long-context scores, when measured
COST = (("train_tokens_per_s", "train", "train tokens/s", 1.0), ("peak_mem_bytes", "train",
                                                                  "peak memory of a train step (MiB)", MiB))


def best_and_tied(table, lower, kind="real"):
    """(best, n, [(variant, Paired difference to the best)] of the tied ones, closest first, by name among equals)
    of a seed table; None without a finite value (NaN or inf only: a diverged run). ranks.best_and_ties decides
    (kind: which mean is best, harness.stats.KINDS); stats.paired gives each tie's interval."""
    t = table.loc[:, np.isfinite(table.astype(float)).any()]
    if t.shape[1] == 0:
        return None
    best, ties = ranks.best_and_ties(t, lower, kind=kind)
    diffs = sorted(((v, stats.paired(t[v], t[best])) for v in ties), key=lambda x: (abs(x[1].diff), x[0]))
    return best, int(t[best].notna().sum()), diffs


def _num(x, half):
    """x signed, to the decimals that show `half` to 2 significant digits (tens, hundreds when it is large)."""
    if not half > 0:
        return _signed(x)
    k = decimals(half)
    r = round(x, k)
    return "0" if r == 0 else f"{r:+.0f}" if k <= 0 else _signed(x, k)


def _tie(v, p):
    if p.hi == p.lo:
        return f"`{v}` ({'identical on every seed' if p.diff == 0 else f'Δ {_signed(p.diff)} on every seed'})"
    h = (p.hi - p.lo) / 2
    return f"`{v}` (Δ {_num(p.diff, h)}, CI [{_num(p.lo, h)}, {_num(p.hi, h)}])"


def answer(d, lower, question, what):
    """One markdown bullet: the best of rows d (per seed, column `short`) and its ties; '' when none."""
    table, kind = stats.seed_table(d, "short"), bounds.kind_of(d)
    r = best_and_tied(table, lower, kind)
    if r is None:
        return ""
    best, n, ties = r
    iv = stats.KINDS[kind](table[best])
    head = (f"- **{question}** — {what}, {'lower' if lower else 'higher'} is better: best `{best}` "
            f"{fmt_interval(iv.mean, iv.lo, iv.hi)}")
    if n < 2:
        return head + "; n = 1 seed: nothing is separated from it (one seed decides nothing)."
    if not ties:
        return head + f"; every other variant is worse by a paired CI that excludes 0 (unadjusted). n = {n} seeds."
    return head + f"; tied with it: {', '.join(_tie(v, p) for v, p in ties)}. n = {n} seeds."


def _configs(paths, run_ids):
    """{run_id: the run's config dict} for the run dirs under paths whose name ends a run id in run_ids."""
    want = {r.rpartition("/")[2]: r for r in run_ids}
    out = {}
    for path in paths:
        for d in results.run_dirs(path):
            f = d / ".hydra" / "config.yaml"
            if d.name in want and f.exists():
                out[want[d.name]] = yaml.load(f.read_text(), Loader=results.yaml_loader())
    return out


def _millions(lo, hi):
    return f"{lo / 1e6:.3g}M" if lo == hi else f"{lo / 1e6:.3g}M–{hi / 1e6:.3g}M"


def scale(g, paths):
    """The scale line of a comparison group: model, depth, width, parameters and training tokens."""
    from harness.config import from_dict
    from harness.model import from_config
    first = g.groupby("variant").run_id.first()  # one run per variant: parameters do not depend on the seed
    cfgs = _configs(paths, set(first))
    counts, tokens = [], []
    for raw in cfgs.values():
        try:
            cfg = from_dict(raw)
            counts.append(sum(p.numel() for p in from_config(cfg.model, cfg.encoding).parameters()))
            tokens.append(cfg.train.steps * cfg.train.batch_size * cfg.train.seq_len)
        except (ValueError, TypeError, KeyError) as e:  # a config this checkout cannot build: say so, go on
            print(f"harness.report: scale of {raw.get('encoding', {}).get('name')}: {e}", file=sys.stderr)
    dims = g.groupby("model")[["n_layers", "d_model"]].first().astype(int)
    model = ", ".join(f"`{m}` ({k} layer{'s' if k != 1 else ''}, d_model {w})" for m, k, w in
                      zip(dims.index, dims.n_layers, dims.d_model))
    steps = sorted(int(s) for s in g.steps.dropna().unique())
    line = f"model {model}"
    if counts:
        line += f", {_millions(min(counts), max(counts))} parameters (by encoding)"
    if tokens:
        line += f", {_millions(min(tokens), max(tokens))} training tokens"
    if steps:
        lens = ", ".join(str(int(L)) for L in sorted(g.train_len.unique()))
        line += f" ({', '.join(map(str, steps))} steps at train length {lens})"
    return line + f"; device {', '.join(sorted(g.device.unique()))}"


def group_lines(g, paths):
    """The bullets of one comparison group (report rows of one group, extension rows left out)."""
    out = []
    m = mains(g)
    if m:
        metric, _, title, d = m[0]
        at = lengths(d)
        if at and at[0][1].startswith("1×"):
            out.append(answer(d[d.eval_len == at[0][0]], lower_is_better(metric), "Train length",
                              f"{title} at {at[0][0]} tokens (1× the train length)"))
        top = int(d.dropna(subset=["value"]).eval_len.max())
        if not at or top != at[0][0]:
            out.append(answer(d[d.eval_len == top], lower_is_better(metric), "Extrapolation",
                              f"{title} at {top} tokens (the longest length, "
                              f"{top / float(d.train_len.iloc[0]):g}× the train length)"))
    for metric, title in LONG:
        d = g[(g.metric == metric)].dropna(subset=["value"])
        if len(d):
            top = int(d.eval_len.max())
            out.append(answer(d[d.eval_len == top], lower_is_better(metric), "Long context",
                              f"{title} at {top} tokens"))
    for metric, protocol, title, unit in COST:
        d = g[(g.metric == metric) & (g.protocol == protocol)]
        if d.value.notna().any():
            out.append(answer(d.assign(value=d.value / unit), lower_is_better(metric), "Cost", title))
    return [x for x in out if x]


def lines(df, paths):
    """The section's body (markdown lines) for report rows (harness.report.prepare; lm-eval and pretrained rows
    left out by the caller)."""
    core = df[~df.ext]
    marks = " (the † of the tables)" if core.seed.nunique() >= 2 else ""  # one seed: the tables mark nothing
    out = ["Best = the best mean over seeds, with its 95% interval on the metric's scale (± the t interval; for "
           "perplexity, throughput and memory the geometric mean [the t interval of the logs, exponentiated]; for an "
           "accuracy the t interval clipped to [0, 1], shown [lo, hi] where clipped); *tied* = the paired 95% t "
           f"interval (CI) of the difference Δ = variant − best contains 0{marks}, each pair on its own (not adjusted "
           "for the many pairs: which orders hold after Holm's adjustment, and with what power, is the report's "
           "findings.md). An answer holds at the scale stated with it and on this sweep's data; cost is wall-clock "
           "on the machine that ran the sweep.\n"]
    for group, g in core.groupby("group"):
        body = group_lines(g, paths)
        if body:
            out += [f"**{group}**, at {scale(g, paths)}:\n", *body, ""]
    return out if len(out) > 1 else []


def section(df, paths):
    """`## What to use` lines; [] when no question can be answered."""
    body = lines(df, paths)
    return ["## What to use\n", *body] if body else []


def render(text, root):
    """text with every reference-summary block (and ladder-summary block: harness.report.budget.readme_lines)
    regenerated from the results dir it names (relative to root)."""
    from harness.report import budget, findings, findings_md
    from harness.report.labels import prepare

    def rows(m):
        df = results.load(Path(root) / m.group(2))
        return prepare(df[~df.params.str.contains('"pretrained"') & ~df.protocol.str.startswith("lm_eval")])

    def one(m):
        return m.group(1) + "\n".join(lines(rows(m), [Path(root) / m.group(2)])) + "\n" + m.group(4)

    def ladder(m):
        d = rows(m)
        lines_ = budget.readme_lines(d) + findings_md.readme_lines(findings.findings(d))
        return m.group(1) + "\n".join(lines_) + "\n" + m.group(4)
    return LADDER.sub(ladder, BLOCK.sub(one, text))


def readme(path, write=False, check=False):
    """Regenerate the README's reference-summary blocks: --check exits 1 when stale, --write rewrites them."""
    text = Path(path).read_text()
    if not BLOCK.search(text):
        raise ValueError(f"{path} has no <!-- reference-summary: DIR --> ... <!-- /reference-summary --> block")
    new = render(text, Path(path).parent)
    if check and new != text:
        print(f"{path}: the reference summary is stale; run python -m harness.report results/reference --readme "
              f"{path} --write", file=sys.stderr)
        return 1
    if write and new != text:
        results.atomic_write(Path(path), new.encode())
    return 0
