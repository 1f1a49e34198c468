"""The pretrained-model report: rows of harness.pretrained.study (sweeps pretrained, pretrained_precision) and the
laptop extension sweep -> report.md + pretrained.png, and the generated block of docs/pretrained.md.

`python -m harness.report.pretrained RESULTS... [--out DIR] [--readme docs/pretrained.md --write|--check]`. Every number
over windows is `mean ± half-width of its 95% t interval` with n = windows (harness.stats); differences are
paired on the same windows."""
import argparse
import json
import re
import sys
from pathlib import Path

import pandas as pd

from harness import results, stats
from harness.pretrained import checkpoint
from harness.pretrained.rows import lm_rows, order as _order, prepare
from harness.report import pretrained_retrieval, pretrained_transfer
from harness.report.pretrained_precision import precision_lines
from harness.report.bounds import checked
from harness.report.pretrained_plots import figure

CORPORA = {"pystdlib": "code: the Python stdlib", "kjv": "prose: the King James Bible"}
BLOCK = re.compile(r"(<!-- pretrained-table: (\S+) -->\n)(.*?)(<!-- /pretrained-table -->)", re.S)


def _cell(x, metric):
    checked(metric, x)
    return "—" if x.n == 0 else (f"{x.mean:.3f}" if x.n < 2 else f"{x.mean:.3f} ± {x.half:.3f}")


def _diff(x):
    return "—" if x.n < 2 else f"{x.diff:+.3f} [{x.lo:+.3f}, {x.hi:+.3f}]{' *' if x.significant else ''}"


def variant_table(rows, lens=None, head="variant"):
    """Markdown: variant x length of rows' values (one metric), mean ± half of the 95% t interval over windows;
    lens default: all. A variant measured on fewer windows than the most any variant has says its n by its name."""
    lens = sorted(rows.eval_len.unique()) if lens is None else lens
    lines = [f"| {head} | " + " | ".join(f"{L}" for L in lens) + " |", "|---" * (len(lens) + 1) + "|"]
    most = rows.groupby("variant").seed.nunique().max()
    for v in _order(rows.variant.unique()):
        cells = [_cell(stats.interval(rows[(rows.variant == v) & (rows.eval_len == L)].value), rows.metric.iloc[0])
                 for L in lens]
        n = rows[rows.variant == v].seed.nunique()
        lines.append(f"| {v}{f' (n = {n})' if n < most else ''} | " + " | ".join(cells) + " |")
    return lines


def bpb_table(d, corpus="pystdlib"):
    """Markdown: variant x length, bits per byte, mean ± half over windows; and n."""
    b = lm_rows(d, corpus)
    return variant_table(b), int(b.seed.nunique())


def reference_line(d, corpus="pystdlib"):
    """The `none` rows against transformers' own forward on the same windows."""
    t = d[(d.metric == "bpb") & (d.rope_impl == "transformers") & (d.corpus == corpus)]
    if t.empty:
        return "transformers' own forward: not measured."
    h = lm_rows(d, corpus)
    h = h[(h.extension == "none") & (h.eval_len == t.eval_len.iloc[0])]
    m = t.set_index("seed").value.align(h.set_index("seed").value, join="inner")
    gap = float((m[0] - m[1]).abs().max())
    return (f"With the checkpoint's own RoPE (`none`) the harness's rotation gives transformers' unmodified forward: "
            f"max |Δ bits/byte| = {gap:.1e} at {int(t.eval_len.iloc[0])} tokens over n = {len(m[0])} windows.")


def corpora_lines(d):
    """Markdown: where code and prose disagree about an order at the longest length: pairs of variants whose paired
    difference excludes 0 on both corpora with opposite signs, and pairs established on one corpus only."""
    if not all(len(lm_rows(d, c)) for c in CORPORA):
        return []
    L = int(min(lm_rows(d, c).eval_len.max() for c in CORPORA))
    tabs = {c: stats.seed_table(lm_rows(d, c)[lm_rows(d, c).eval_len == L], "variant") for c in CORPORA}
    names = [v for v in _order(tabs["pystdlib"].columns) if v in tabs["kjv"]]
    flips, one = [], []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            p = {c: stats.paired(tabs[c][a], tabs[c][b]) for c in CORPORA}
            sig = {c: p[c].significant for c in CORPORA}
            if all(sig.values()) and (p["pystdlib"].diff > 0) != (p["kjv"].diff > 0):
                flips.append(f"{a} vs {b} (code {p['pystdlib'].diff:+.3f}, prose {p['kjv'].diff:+.3f})")
            elif any(sig.values()) and not all(sig.values()):
                c = next(c for c in CORPORA if sig[c])
                one.append(f"{a} {'>' if p[c].diff > 0 else '<'} {b} on {c} only")
    n = {c: tabs[c].shape[0] for c in CORPORA}
    return [f"### Code against prose at {L} tokens\n",
            f"Pairs of variants whose order the two corpora establish in opposite directions (paired 95% CIs both "
            f"excluding 0; n = {n['pystdlib']} code and {n['kjv']} prose windows): "
            + ("; ".join(flips) if flips else "none") + ".",
            "", "Established on one corpus only (bits per byte, higher is worse): "
            + ("; ".join(one) if one else "none") + ".", ""]


def speed_lines(d):
    """Markdown: the forwards' useful FLOP/s as a fraction of an fp32 matmul's in the same process, per length."""
    f = d[d.metric == "flops_ratio"]
    if f.empty:
        return []
    # each forward one value; a positive ratio that spreads under load: the percentile bootstrap stays inside [0, inf)
    s = stats.summarize(f.assign(forward=range(len(f))), ["eval_len"], seed="forward", method="bootstrap")
    peak = f.params.map(lambda p: json.loads(p).get("yardstick_flops")).median()
    return ["### Speed against the machine\n",
            f"Each scoring forward's useful FLOPs (projections, causal attention, LM head; "
            f"harness.pretrained.speed) per second over an fp32 matmul's in the same process (median yardstick "
            f"{peak / 1e9:.0f} GFLOP/s): "
            + ", ".join(f"{int(q.eval_len)} tokens {checked('flops_ratio', q)['mean']:.2f} [{q.lo:.2f}, {q.hi:.2f}] "
                       f"(n = {int(q.n)} forwards)"
                       for _, q in s.iterrows()) + ".",
            ""]


def comparisons(d, L, against, corpus="pystdlib"):
    """Markdown: every variant minus each of `against` in bits per byte at length L, paired on the windows."""
    t = stats.seed_table(lm_rows(d, corpus).query("eval_len == @L"), "variant")
    against = [a for a in against if a in t]
    if not against:
        return []
    lines = ["| variant | " + " | ".join(f"− {a}" for a in against) + " |", "|---" * (len(against) + 1) + "|"]
    for v in _order(t.columns):
        lines.append(f"| {v} | " + " | ".join("" if v == a else _diff(stats.paired(t[v], t[a])) for a in against)
                     + " |")
    return lines


def _slug(model):
    return re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")


def _models(d):
    """Models, the one with the most variants first (the extension study), then by name."""
    return sorted(d.model.unique(), key=lambda m: (-d[d.model == m].variant.nunique(), m))


def model_section(d, laptop=None, out=None, made=None):
    """Markdown lines of one model's section; writes pretrained_<model>.png into out when given."""
    r = d.iloc[0]
    about = checkpoint.scale(r.model)
    md = [f"## Pretrained model: {r.model}\n",
          f"A real pretrained model, not trained here: {r.model} ({about + '; ' if about else ''}{r.n_layers} layers, "
          f"d_model {r.d_model}, {r.n_heads} heads of {r.head_dim}; trained context {r.train_len}), evaluated with "
          f"the harness's RoPE in place of its own, fp32, nonoverlapping windows of a corpus (code: the Python "
          f"stdlib's held-out split; prose: the King James Bible); the unit of variation is the window, n = windows.\n"]
    for corpus in CORPORA:
        table, n = bpb_table(d, corpus)
        if not n:
            continue
        md += [f"### Bits per byte vs window length ({CORPORA[corpus]}, n = {n} windows)\n", *table, "",
               reference_line(d, corpus), ""]
        for L in sorted(lm_rows(d, corpus).eval_len.unique()):
            rows = comparisons(d, L, ["none", "linear x2"], corpus) if L > r.train_len else []
            if rows:
                md += [f"Differences in bits per byte at {L} tokens ({corpus}), paired on the windows: mean [95% CI] "
                       f"(* = the CI excludes 0):\n", *rows, ""]
    md += corpora_lines(d) + speed_lines(d)
    ret = pretrained_retrieval.lines(d)
    if ret:
        md += ["### Retrieval over lengths and depths\n", *ret]
    prec = precision_lines(d)
    if prec:
        md += ["### RoPE precision pipelines against fp32\n",
               "The RoPE stages (positions, inv_freq, phase, table, rotation, q/k) in each pipeline's dtypes "
               "(conf/precision/), the rest of the model in fp32; KL(p_fp32 ‖ p_pipeline) per next-token "
               "prediction, kl_safe_len = the end of the last log window up to which every window's mean KL is at "
               "most 1e-3 nats (mean, and min over windows); KL as mean [percentile-bootstrap 95%] over windows.\n", *prec, ""]
    if laptop is not None and lm_rows(d).variant.nunique() > 1:
        md += ["### Does the laptop study predict the real model?\n"]
        for ratio in (2, 4):
            md += pretrained_transfer.extension_lines(d, laptop, ratio)[0] + [""]
        md += pretrained_transfer.section(d, laptop, out, made)
    if out is not None:
        name = f"pretrained_{_slug(r.model)}.png"
        if figure(d, out, made if made is not None else [], name):
            md += [f"![{r.model}]({name})\n"]
        shown = pretrained_retrieval.figure(d, out, made if made is not None else [], f"retrieval_{_slug(r.model)}.png")
        md += [f"![{r.model}: retrieval]({shown})\n"] if shown else []
    return md


def claims_dir(paths):
    """The dir holding the sweeps the real-model claims read (`pretrained`, `pretrained_precision`), or None."""
    for p in map(Path, paths):
        if (p / "pretrained").is_dir():
            return p
        if p.name == "pretrained" and p.is_dir():
            return p.parent
    return None


def claims_lines(sweeps, sources=True):
    """One line per real-model claim (harness.claims.pretrained): its verdict and evidence, judged by its rule."""
    from harness.claims import CLAIMS, Context  # lazy: the claims read these rows through harness.pretrained.rows
    ctx, out = Context(Path(sweeps), Path(sweeps)), []
    for c in CLAIMS:
        if c.measure.__module__ == "harness.claims.pretrained":
            ev = c.measure(ctx)
            v, reason = c.rule(ev.numbers)
            out.append(f"- Claim {c.id}, {c.text}{f' ({c.source})' if sources else ''} **{v}**: {reason}.")
    return out


def section(df, laptop=None, out=None, made=None):
    """Markdown lines of the pretrained sections, one per model."""
    d = prepare(df)
    return [line for m in _models(d) for line in model_section(d[d.model == m], laptop, out, made)] if len(d) else []


def readme_block(df, laptop):
    """The README's generated block, per model: bits per byte at its three longest lengths, the reference check,
    and for the extension study the laptop-to-real τ."""
    d, lines = prepare(df), []
    for m in _models(d):
        dm = d[d.model == m]
        b = lm_rows(dm)
        if b.empty:
            continue
        L0, lens = int(b.train_len.iloc[0]), sorted(b.eval_len.unique())[-3:]
        lines += [f"**{m}** ({checkpoint.scale(m)}; trained context {L0}): bits per byte on the Python stdlib's "
                  f"held-out split, mean ± 95% t half-width over n = {b.seed.nunique()} windows of {b.eval_len.max()} "
                  f"tokens (a variant run on fewer says its n).", "", *variant_table(b, lens, "RoPE (no fine-tune)"), "", reference_line(dm), ""]
        lines += _summary_lines(dm)
        if laptop is not None and b.variant.nunique() > 1:
            t = pretrained_transfer.extension_lines(dm, laptop, 2)[0]
            lines += ["Laptop study → real model: " + t[0], "", *t[2:], ""]
            matched = pretrained_transfer.readme_lines(dm, laptop)
            lines += ["At matched RoPE geometry (the laptop proxy, sweep `transfer`): " + matched[0], *matched[1:]] \
                if matched else []
    return "\n".join(lines).rstrip("\n") + "\n\n"


def _summary_lines(d):
    """README lines: the longest position each precision pipeline keeps under the KL bar, and passkey accuracy."""
    out = []
    safe = d[d.metric == "kl_safe_len"]
    if len(safe):
        per = safe.groupby("pipeline").value.min().sort_values(ascending=False)
        bar = json.loads(safe.params.iloc[0])["bar"]
        out += [f"RoPE precision pipelines against fp32 (n = {safe.seed.nunique()} windows): the longest position "
                f"up to which every window's mean KL stays at most {bar:g} nats: "
                + ", ".join(f"{k} {int(v)}" for k, v in per.items()) + ".", ""]
    return out + pretrained_retrieval.lines(d)


def render(text, root):
    """text with every pretrained block regenerated from the results dir it names (relative to root)."""
    def one(m):
        where = Path(root) / m.group(2)
        df = results.load(where)
        claims = ("Claims on the real model (`make claims`' rules, n = windows):\n\n"
                  + "\n".join(claims_lines(where, sources=False)) + "\n") if claims_dir([where]) else ""
        return m.group(1) + readme_block(df, df) + claims + m.group(4)
    return BLOCK.sub(one, text)


def build(paths, out):
    df = results.load(*paths)
    if prepare(df).empty:
        raise ValueError(f"no pretrained rows under {[str(p) for p in paths]}; run make pretrained first")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    made = []
    md = ["# Pretrained-model report\n", *section(df, df, out, made)]
    sweeps = claims_dir(paths)
    if sweeps is not None and checkpoint.SHIPPED["smollm2"].label in set(prepare(df).model):  # the claims name it
        md += ["## Claims on the real model\n", "Judged by the rules of `make claims` (python -m harness.claims "
               f"--sweeps {sweeps} --only 22 23 24), n = windows:\n", *claims_lines(sweeps), ""]
    results.atomic_write(out / "report.md", "\n".join(md).encode())
    return out / "report.md"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m harness.report.pretrained", description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="dirs holding the pretrained runs and the laptop extension runs")
    ap.add_argument("--out", default=None, help="output dir (default: the first path)")
    ap.add_argument("--readme", default=None, help="README to regenerate the pretrained blocks of (--write/--check)")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    if a.readme:
        text = Path(a.readme).read_text()
        new = render(text, Path(a.readme).parent)
        if a.check and new != text:
            print(f"{a.readme}: a pretrained block is stale; run python -m harness.report.pretrained "
                  f"{' '.join(a.paths)} --readme {a.readme} --write", file=sys.stderr)
            return 1
        if a.write:
            Path(a.readme).write_text(new)
        return 0
    try:
        path = build(a.paths, a.out or a.paths[0])
    except (ValueError, FileNotFoundError) as e:  # the user's paths: exit 2, as harness.report
        print(f"harness.report.pretrained: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
