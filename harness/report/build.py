"""Rows -> report.md with tables + PNG plots. `python -m harness.report RESULTS... [--out DIR]
[--reference VARIANT] [--test t|permutation] [--flex CSV...]`; `--readme README.md --write|--check` regenerates
(checks) the README's reference-summary block instead (harness.report.summary).

Each curve or table row is a *variant* (harness.report.labels). Runs that differ only in their seed are
one variant: every number is a mean over seeds with its 95% interval, on the metric's scale (harness.report.bounds:
a proportion's interval stays in [0, 1], a ratio's is a geometric one), and every aggregation over seeds goes
through harness.stats (the sibling modules tables, plots, confidence, budget, lmeval and labels hold the pieces)."""
import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from harness import results
from harness.report import budget as report_budget
from harness.report import findings as report_findings, findings_md
from harness.report import chomsky as report_chomsky
from harness.report import confidence as report_confidence
from harness.report import flex as report_flex
from harness.report import throughput as report_throughput
from harness.report import lmeval as report_lmeval
from harness.report import longctx as report_longctx
from harness.report import bounds, families, precision as report_precision, summary as report_summary
from harness.infra import wandb_sink
from harness.measure.precision_pipelines import MAX_LEN
from harness.report.labels import prepare, variants
from harness.report.figures import fig_cost, fig_passkey, fig_training
from harness.report.plots import fig_curves, save
from harness.report.style import label
from harness.report.tables import (ci_table, md_table, select,  # noqa: F401 - md_table: report_precision
                                   table)

MiB = 2 ** 20
TESTS = ("t", "permutation")
DEFAULT_REFERENCE = "rope"


def pick_reference(df, reference):
    """The reference variant of the Comparisons: `reference` (must be a variant), else rope, else the first."""
    valid = sorted(df.loc[~df.ext, "short"].unique())
    if reference is not None:
        if reference not in valid:
            raise ValueError(f"unknown reference {reference!r}; variants: {', '.join(valid)}")
        return reference
    # rope, or rope with every other label part at its default (`rope qk_norm=default` beside qk_norm variants)
    plain = [v for v in valid if v.split(" ")[0] == DEFAULT_REFERENCE and all(
        part.endswith("=default") for part in v.split(" ")[1:])]
    return plain[0] if plain else (valid[0] if valid else None)


def by_panel(d, x):
    """summarize frame by (variant, x); with several budgets one panel per budget, variants by their
    label without the budget part (columns panel, variant)."""
    if d.budget.nunique() > 1:
        return bounds.summarize(d.assign(panel=d.budget, variant=d.pair), ["panel", "variant", x])
    return bounds.summarize(d, ["variant", x])


def curve_key(d):
    """The label a figure's curves carry: `pair` (without the budget) when a panel per budget, else `variant`."""
    return "pair" if d.budget.nunique() > 1 else "variant"


def curves(d, out, name, made, title, ylabel, train_lens, logy=True, reference=None, groups=None):
    """A figure of d's means vs eval length: panels by family (or `groups`), one more column per budget."""
    if groups is None:
        groups, reference = families.of_rows(d, reference, curve_key(d))
    save(fig_curves(by_panel(d, "eval_len"), "eval_len", title, label("eval_len", log=True) + "; dotted: train "
                    "length", ylabel, train_lens, logy, panels=list(report_budget.budget_table(d).index),
                    groups=groups, reference=reference), out, name, made)


def extension_groups(d):
    """A panel per trained variant: its eval-time extensions beside it (labels `<variant>+<extension>`)."""
    key = curve_key(d)
    base = d[key].where(~d.ext, d[key].str.rpartition("+")[0])
    return families.panels(dict(zip(d[key], base)))


def cost_plot(tdf, df, out, made, task, reference=None):
    """Quality at 8x (else the longest length) against train tokens/s and train peak memory; [] if absent."""
    m = report_confidence.mains(tdf)
    tp = select(df, "train_tokens_per_s", "train")
    mem = select(df, "peak_mem_bytes", "train")
    if not m or tp is None or mem is None:
        return []
    metric, _, title, d = m[0]
    L, where = (report_confidence.lengths(d, longest=False) or report_confidence.lengths(d))[-1]
    q = bounds.summarize(d[d.eval_len == L], "variant")
    costs = [(label("train_tokens_per_s") + ": right is cheaper", bounds.summarize(tp, "variant")),
             (label("peak_mem_bytes") + " of a train step: left is cheaper",
              bounds.summarize(mem.assign(value=mem.value / MiB), "variant"))]
    name = f"cost_{task}.png"
    groups, ref = families.of_rows(d, reference)
    save(fig_cost(q, costs, f"{title} at {L} ({where})" + (", log scale" if metric == "ppl" else ""),
                  logy=metric == "ppl", groups=groups, reference=ref), out, name, made)
    return [f"### Quality against cost\n", f"![quality vs cost]({name})\n"]


def task_section(task, all_t, df, train_lens, out, made, reference=None):
    tdf, text = all_t[~all_t.ext], all_t[all_t.ext]
    md = [f"## Task `{task}`\n"]
    ppl = select(tdf, "ppl", "nonoverlapping")
    if ppl is not None:
        name = f"extrapolation_{task}.png"
        curves(ppl, out, name, made, f"{task}: perplexity vs eval length (nonoverlapping windows)",
               label("ppl", log=True), train_lens, reference=reference)
        md += table(ppl, "Perplexity, nonoverlapping windows (encoding × eval length)")
        md += [f"![extrapolation]({name})\n"]
        for title, metric, proto in (("Perplexity, sliding windows", "ppl", "sliding"),
                                     ("NLL (nats) of tokens at positions ≥ train length, nonoverlapping",
                                      "nll_beyond_train", "nonoverlapping")):
            d = select(tdf, metric, proto)
            if d is not None:
                md += table(d, title)
    md += report_longctx.section(tdf, out, made, task, train_lens, reference)
    acc = select(tdf[tdf.protocol == "iid"], "acc")
    if acc is not None:
        name = f"accuracy_{task}.png"
        curves(acc, out, name, made, f"{task}: token accuracy vs length", label("acc"), train_lens, logy=False,
               reference=reference)
        md += table(acc, "Accuracy vs length (token accuracy on scored positions)") + [f"![accuracy]({name})\n"]
    pk = select(tdf, "seq_acc", "depth=")
    if pk is not None:
        name = f"depths_{task}.png"
        save(fig_passkey(bounds.summarize(pk, ["variant", "protocol", "eval_len"])), out, name, made, tight=False)
        md += table(pk, "Sequence accuracy over needle depths (mean over depths per seed)") + [f"![depths]({name})\n"]
    md += cost_plot(tdf, df, out, made, task, reference)
    if not text.empty:
        both = pd.concat([text, tdf[tdf.encoding.isin(text.encoding.unique())]])
        metric, proto, ylabel, logy = (("ppl", "nonoverlapping", label("ppl", log=True), True) if ppl is not None
                                       else ("acc", "iid", label("acc"), False))
        d = select(both, metric, proto)
        if d is not None:
            name = f"extension_{task}.png"
            curves(d, out, name, made, f"{task}: RoPE eval-time extension, {label(metric)} vs eval length "
                   "(a panel per trained variant)", ylabel, train_lens, logy, groups=extension_groups(d))
            md += table(d, f"RoPE context extension at evaluation time (no retraining), {metric}")
            md += ["factor `auto` = eval_len / train_len (dynamic: 1); YaRN betas as in eval.extension.\n",
                   f"![extension]({name})\n"]
    return md


def training_section(df, out, made, reference=None):
    loss = df[df.metric == "train_loss"]
    wall = df[df.metric == "train_wall_s"]
    if loss.empty and wall.empty:
        return []
    md = ["## Training\n"]
    if len(loss):
        groups, ref = families.of_rows(loss, reference)
        save(fig_training(bounds.summarize(loss, ["variant", "step"]), label("train_loss"), groups, ref), out,
             "training.png", made, tight=False)
        md.append("![training](training.png)\n")
    if len(wall):
        md += ["### Train wall time (s)\n", *ci_table(wall.assign(col="train wall s"), "col", True)]
    return md


def non_finite(df, most=12):
    """A line naming the rows whose value is inf (a diverged evaluation): every mean, interval and best leaves them
    out (stats: n counts finite values), and a cell with none left reads "—"; NaN rows are the section below's."""
    bad = df[np.isinf(df.value.astype(float))]
    if bad.empty:
        return []
    said = [f"`{r.run_id}` {r.metric}" + (f" at {int(r.eval_len)}" if r.eval_len == r.eval_len else "")
            + f" = {r.value}" for r in bad.head(most).itertuples()]
    more = f" and {len(bad) - most} more" if len(bad) > most else ""
    return [f"**Non-finite values left out of every mean** ({len(bad)} rows): " + "; ".join(said) + more + "\n"]


def head(df):
    """The report's first lines: what the rows are, how intervals are read, failed or skipped runs."""
    seeds = sorted(df.seed.dropna().unique())
    md = ["# Positional-encoding benchmark report\n",
            f"Sweeps: {', '.join(sorted(df.sweep.unique()))}; {df.run_id.nunique()} runs, {len(df)} rows; "
            f"seeds: {', '.join(str(int(s)) for s in seeds)} (n = {len(seeds)}); "
            f"tasks: {', '.join(sorted(df.task.unique()))}; device: {', '.join(sorted(df.device.unique()))}; "
            f"torch {', '.join(sorted(df.torch.unique()))}; git {', '.join(sorted(df.git_sha.unique()))}.\n",
            "Every number over seeds comes with its 95% interval on the metric's scale: `mean ± half-width` "
            "of the t interval; for a proportion (accuracy) or a quantity ≥ 0 (loss, effective length) that "
            "interval clipped to the range, shown `mean [lo, hi]` where clipped; for a positive ratio-scale "
            "quantity (perplexity, throughput, memory, time) the geometric mean `[lo, hi]` of the t interval "
            "of the logarithms. A difference is called one only when its paired t interval excludes zero, "
            "and one seed decides nothing.\n"]
    if df.attrs.get("failed"):
        md.append("**Failed runs left out:** " + "; ".join(f"`{p}` ({m})" for p, m in df.attrs["failed"]) + "\n")
    if df.attrs.get("skipped"):
        md.append("**Skipped corrupt rows files:** " + "; ".join(f"`{p}` ({e})" for p, e in df.attrs["skipped"]) + "\n")
    return md


def build(paths, out, kernel_max_len=MAX_LEN, reference=None, test="t", flex=()):
    """Write out/report.md and out/*.png from the rows under paths; returns the report path.
    kernel_max_len: longest position of the precision section's kernel-level grid. reference: the variant
    the Comparisons are against (default rope when present); test: "t" (paired t) or "permutation";
    flex: CSVs of harness.bench.flex_bench for the attention-paths section."""
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; valid: {', '.join(TESTS)}")
    out = Path(out)
    df = results.load(*paths)
    if df.empty:
        raise ValueError(f"no rows under {[str(p) for p in paths]}; run a sweep first (make sweep)")
    from harness.report import pretrained as report_pretrained  # here: -m harness.report.pretrained imports it once
    if len(report_pretrained.prepare(df)) == len(df):  # only pretrained-model rows: their own report
        return report_pretrained.build(paths, out)
    raw, pretrained = df, df[df.params.str.contains('"pretrained"')]  # with trained runs: a section at the end
    df = prepare(df[~df.index.isin(pretrained.index)])
    reference = pick_reference(df, reference)  # an unknown reference fails before any file is written
    report_flex.read(flex)  # so does a bad --flex file
    out.mkdir(parents=True, exist_ok=True)
    report_precision.start(df, paths, out, kernel_max_len)  # in another process while the rest is made
    try:  # a report that fails stops its kernel-rows process rather than leaving it computing
        made, md = [], head(df)
        md += non_finite(df)
        train_lens = sorted(df.train_len.unique())
        lm_eval = df.protocol.str.startswith("lm_eval")
        md += report_summary.section(df[~lm_eval], paths)
        for task, all_t in df[~lm_eval].groupby("task"):
            md += task_section(task, all_t, df, train_lens, out, made, reference)
        core = df[~lm_eval]
        md += report_confidence.section(core, reference, test)
        chomsky = report_chomsky.section(core)
        md += [chomsky] if chomsky else []
        md += report_budget.section(core, out, made)
        found = report_findings.findings(core, reference)
        md += findings_md.section(found)
        md += report_lmeval.section(df)
        md += report_throughput.section(df, out, made)
        at = len(md)  # the precision section's place; made last, so that its kernel rows have longest to finish
        md += report_flex.section(flex, out, made)
        md += training_section(df, out, made, reference)
        md += report_pretrained.section(pretrained, raw, out, made) if len(pretrained) else []
        md[at:at] = report_precision.section(df, paths, out, made, md_table, kernel_max_len, reference)
        nan = df[df.value.isna() & df.params.str.contains("nan_reason")]
        if not nan.empty:
            md += ["## Not measurable\n"] + sorted({f"- {r.variant} at {r.eval_len}: "
                                                    f"{json.loads(r.params)['nan_reason']}"
                                                    for r in nan.itertuples()}) + [""]
        report = out / "report.md"
        if len(found):
            results.atomic_write(out / "findings.md", findings_md.markdown(found).encode())
        results.atomic_write(report, "\n".join(md).encode())
        return report
    except BaseException:
        report_precision.stop_kernel_rows()
        raise


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m harness.report", description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="*", default=["results/sweeps/default"], help="sweep or run dirs")
    p.add_argument("--out", default=None, help="output dir (default: the first path)")
    p.add_argument("--kernel-max-len", type=int, default=MAX_LEN, help="precision section: kernel grid length")
    p.add_argument("--reference", default=None,
                   help=f"variant the Comparisons are against (default: {DEFAULT_REFERENCE} when present)")
    p.add_argument("--test", default="t", choices=TESTS, help="paired test of the Comparisons (default: t)")
    p.add_argument("--flex", nargs="+", default=[], metavar="CSV",
                   help="attention-paths section from python -m harness.bench.flex_bench CSVs")
    p.add_argument("--wandb", default="offline", choices=("offline", "online", "disabled"),
                   help="log the over-seed summary as one W&B run per report (default: offline, in OUT/wandb_files)")
    p.add_argument("--readme", default=None, help="README whose reference-summary block to regenerate, then exit")
    p.add_argument("--write", action="store_true", help="with --readme: rewrite the block")
    p.add_argument("--check", action="store_true", help="with --readme: exit 1 when the block is stale")
    a = p.parse_args(argv)
    try:
        if a.readme:
            return report_summary.readme(a.readme, a.write, a.check)
        path = build(a.paths, a.out or a.paths[0], a.kernel_max_len, a.reference, a.test, a.flex)
    except (ValueError, FileNotFoundError) as e:  # the user's paths or options: exit 2, as harness and argparse
        print(f"harness.report: error: {e}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:  # a full disk, an output dir that cannot be written: report.md is written whole or not at all
        print(f"harness.report: error: {results.write_error(e)}; report.md is as it was", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("harness.report: interrupted; report.md is as it was (it is written whole or not at all)",
              file=sys.stderr)
        sys.exit(130)
    finally:
        report_precision.stop_kernel_rows()
    print(f"wrote {path}")
    err = log_summary(a.paths, path.parent, a.wandb)
    if err:
        print(f"harness.report: {err} (report.md is written)", file=sys.stderr)


def log_summary(paths, out, mode):
    """The W&B summary of a report: every metric's over-seed mean, CI and n (bounds.summarize: each metric's kind)."""
    if mode == "disabled":
        return None
    df = results.load(*paths)
    df["variant"] = variants(df)
    keep = df[~df.metric.isin(["train_loss", "nll_by_pos"]) & ~df.metric.str.endswith("_stderr")]
    summary = bounds.summarize(keep, ["metric", "protocol", "eval_len", "variant"])
    return wandb_sink.log_summary(out, mode, ",".join(sorted(df.sweep.unique())), summary)

