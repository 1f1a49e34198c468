"""Rows -> report.md with pivot tables + PNG plots. `python -m harness.report RESULTS... [--out DIR]`.

Each curve or table row is a *variant*: the encoding name, plus the params that differ between runs of
that encoding (e.g. `rope base=100`), plus `+<extension>` for RoPE eval-time extension rows, plus the
model or train length when the results hold several."""
import argparse
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.ticker  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from harness import report_precision, results  # noqa: E402
from harness.measure.precision_model import PARAM_KEYS  # noqa: E402
from harness.measure.precision_pipelines import MAX_LEN  # noqa: E402

EXTENSION_KEYS = ("extension", "factor", "rope_type", "scaling", "finetune_steps", "finetune_len",
                  "finetune_status", "nan_reason")
MEASUREMENT_KEYS = ("world_size",)  # how a row was measured, not what was trained: never part of a label
MiB = 2 ** 20
STYLES, MARKERS = ("-", "--", ":"), ("o", "s", "^")  # 10 colours x 3 styles: 30 distinct curves


def variants(df: pd.DataFrame) -> pd.Series:
    """A readable label per row (see module docstring)."""
    params = df["params"].map(json.loads)
    own = params.map(lambda p: {k: v for k, v in p.items() if k not in EXTENSION_KEYS + PARAM_KEYS + MEASUREMENT_KEYS})
    label = df["encoding"].copy()
    for enc in df["encoding"].unique():
        rows = df["encoding"] == enc
        keys = sorted({k for p in own[rows] for k in p})
        varying = [k for k in keys if own[rows].map(lambda p: json.dumps(p.get(k), sort_keys=True)).nunique() > 1]
        label[rows] = own[rows].map(lambda p: " ".join([enc] + [f"{k}={p.get(k)}" for k in varying]))
    for col in ("model", "train_len", "task"):
        if df[col].nunique() > 1:
            label = label + " " + col + "=" + df[col].astype(str)
    ext = params.map(lambda p: ("+" + p["extension"] + (f" ft{p['finetune_len']}" if "finetune_len" in p else ""))
                     if "extension" in p else "")
    return label + ext


def _is_ext(df):
    return df["params"].str.contains('"extension"')


def md_table(pt: pd.DataFrame, fmt="{:.3g}") -> str:
    """A pivot table as GitHub markdown (NaN shows as '—')."""
    head = [str(pt.index.name or "")] + [str(c) for c in pt.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for idx, row in pt.iterrows():
        cells = ["—" if (isinstance(v, float) and math.isnan(v)) else fmt.format(v) for v in row]
        lines.append("| " + " | ".join([str(idx)] + cells) + " |")
    return "\n".join(lines)


def pivot(df, metric, protocol=None, columns="eval_len", scale=1.0):
    d = df[df.metric == metric]
    if protocol is not None:
        d = d[d.protocol.str.startswith(protocol)]
    if d.empty:
        return None
    pt = d.pivot_table(index="variant", columns=columns, values="value", aggfunc="median", dropna=False)
    pt.index.name = "variant"
    return pt / scale


def _save(fig, out, name, made):
    path = Path(out) / name
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    made.append(name)


def plot_curves(pt, title, ylabel, train_lens, out, name, made, logy=True):
    """One line per variant vs eval length (log2 x); dashed line at the train length."""
    fig, ax = plt.subplots(figsize=(9, 5.5))
    last = pt.apply(lambda r: r.dropna().iloc[-1] if r.notna().any() else -math.inf, axis=1)
    pt = pt.loc[last.sort_values(ascending=False).index]
    for i, (v, row) in enumerate(pt.iterrows()):  # legend order = order of the curves at the right end
        ax.plot(row.index.astype(int), row.values, marker=MARKERS[i // 10 % 3], ms=4, label=v,
                color=plt.get_cmap("tab10")(i % 10), ls=STYLES[i // 10 % 3])
    for L in train_lens:
        ax.axvline(L, color="grey", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_xticks([int(c) for c in pt.columns], [str(int(c)) for c in pt.columns])
    if logy:
        ax.set_yscale("log")
        plain = matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set(title=title, xlabel="eval length (tokens; dotted: train length)", ylabel=ylabel)
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.grid(alpha=0.3, which="both")
    _save(fig, out, name, made)


def plot_bars(series, title, xlabel, out, name, made):
    s = series.dropna().sort_values()
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(s) + 1.5))
    ax.barh(s.index, s.values, color="tab:blue")
    for y, v in enumerate(s.values):
        ax.text(v, y, f" {v:.3g}", va="center", fontsize=7)
    ax.set(title=title, xlabel=xlabel)
    ax.grid(alpha=0.3, axis="x")
    _save(fig, out, name, made)


def plot_training(df, out, made):
    d = df[df.metric == "train_loss"]
    if d.empty:
        return
    fig, ax = plt.subplots(figsize=(9, 5))
    for i, (v, g) in enumerate(d.groupby("variant")):
        g = g.groupby("step")["value"].median()
        ax.plot(g.index, g.values, label=v, color=plt.get_cmap("tab10")(i % 10), ls=STYLES[i // 10 % 3], lw=1.2)
    ax.set(title="training loss", xlabel="step", ylabel="loss (nats/byte)")
    ax.set_ylim(top=min(6.0, d.value.max()))
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.grid(alpha=0.3)
    _save(fig, out, "training.png", made)


def plot_passkey(df, out, made):
    d = df[(df.metric == "seq_acc") & df.protocol.str.startswith("depth=")]
    if d.empty:
        return
    vs = sorted(d.variant.unique())
    fig, axes = plt.subplots(1, len(vs), figsize=(3.4 * len(vs) + 1, 3.6), squeeze=False, layout="constrained")
    for i, (ax, v) in enumerate(zip(axes[0], vs)):
        pt = d[d.variant == v].pivot_table(index="protocol", columns="eval_len", values="value")
        pt = pt.loc[sorted(pt.index, key=lambda p: float(p.split("=")[1]))]
        im = ax.imshow(pt.values, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        for (r, c), val in np.ndenumerate(pt.values):  # the number in each cell: readable without the colour bar
            ax.text(c, r, f"{val:.2f}", ha="center", va="center", fontsize=7, color="w" if val < 0.6 else "k")
        ax.set_xticks(range(len(pt.columns)), pt.columns, fontsize=7, rotation=45)
        ax.set_yticks(range(len(pt.index)), [p.split("=")[1] for p in pt.index], fontsize=7)
        ax.set(title=v, xlabel="length", ylabel="key depth" if i == 0 else "")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="passkey accuracy (all digits right)")
    fig.savefig(Path(out) / "passkey.png", dpi=110)
    plt.close(fig)
    made.append("passkey.png")


def build(paths, out, kernel_max_len=MAX_LEN):
    """Write out/report.md and out/*.png from the rows under paths; returns the report path.
    kernel_max_len: longest position of the precision section's kernel-level grid."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    df = results.load(*paths)
    if df.empty:
        raise ValueError(f"no rows under {[str(p) for p in paths]}; run a sweep first (make sweep)")
    df["variant"] = variants(df)
    made, md = [], [f"# Positional-encoding benchmark report\n",
                    f"Sweeps: {', '.join(sorted(df.sweep.unique()))}; {df.run_id.nunique()} runs, {len(df)} rows; "
                    f"tasks: {', '.join(sorted(df.task.unique()))}; device: {', '.join(sorted(df.device.unique()))}; "
                    f"torch {', '.join(sorted(df.torch.unique()))}; git {', '.join(sorted(df.git_sha.unique()))}.\n"]
    if df.attrs.get("skipped"):
        md.append("**Skipped corrupt rows files:** " + "; ".join(f"`{p}` ({e})" for p, e in df.attrs["skipped"]) + "\n")
    train_lens = sorted(df.train_len.unique())
    for task, all_t in df.groupby("task"):
        tdf, text = all_t[~_is_ext(all_t)], all_t[_is_ext(all_t)]
        md.append(f"## Task `{task}`\n")
        ppl = pivot(tdf, "ppl", "nonoverlapping")
        if ppl is not None:
            name = f"extrapolation_{task}.png"
            plot_curves(ppl, f"{task}: perplexity vs eval length (nonoverlapping)", "PPL (log)",
                        train_lens, out, name, made)
            md += [f"### Perplexity, nonoverlapping windows (encoding × eval length)\n", md_table(ppl), "",
                   f"![extrapolation]({name})\n"]
            for title, metric, proto in (("Perplexity, sliding windows", "ppl", "sliding"),
                                         ("NLL (nats) of tokens at positions ≥ train length, nonoverlapping",
                                          "nll_beyond_train", "nonoverlapping")):
                pt = pivot(tdf, metric, proto)
                if pt is not None:
                    md += [f"### {title}\n", md_table(pt), ""]
        acc = pivot(tdf[tdf.protocol == "iid"], "acc")
        if acc is not None:
            name = f"accuracy_{task}.png"
            plot_curves(acc, f"{task}: token accuracy vs length", "accuracy", train_lens, out, name, made, logy=False)
            md += ["### Accuracy vs length (token accuracy on scored positions)\n", md_table(acc), "",
                   f"![accuracy]({name})\n"]
        pk = pivot(tdf[tdf.protocol.str.startswith("depth=")], "seq_acc")
        if pk is not None:
            plot_passkey(tdf, out, made)
            md += ["### Passkey accuracy (mean over depths)\n", md_table(pk), "", "![passkey](passkey.png)\n"]
        if not text.empty:
            both = pd.concat([text, tdf[tdf.encoding.isin(text.encoding.unique())]])
            metric, proto, ylabel, logy = (("ppl", "nonoverlapping", "PPL (log)", True) if ppl is not None
                                           else ("acc", "iid", "accuracy", False))
            pt = pivot(both, metric, proto)
            if pt is not None:
                name = f"extension_{task}.png"
                plot_curves(pt, f"{task}: RoPE eval-time extension, {metric} vs eval length", ylabel, train_lens,
                            out, name, made, logy=logy)
                md += [f"### RoPE context extension at evaluation time (no retraining), {metric}\n",
                       "factor `auto` = eval_len / train_len (dynamic: 1); YaRN betas as in eval.extension.\n",
                       md_table(pt), "", f"![extension]({name})\n"]
    md.append("## Throughput and memory\n")
    tp = df[df.metric.isin(["train_tokens_per_s", "eval_tokens_per_s", "peak_mem_bytes"])]
    if not tp.empty:
        tr = tp[tp.metric == "train_tokens_per_s"].groupby("variant")["value"].median()
        plot_bars(tr, "train throughput (fwd+bwd+AdamW), median of repeats", "tokens/s", out, "throughput.png", made)
        mem = tp[(tp.metric == "peak_mem_bytes") & (tp.protocol == "train")].groupby("variant")["value"].median() / MiB
        plot_bars(mem, "peak memory of one training step", "MiB", out, "memory.png", made)
        md += ["Wall-clock numbers from the machine that ran the sweep (two jobs in parallel, one thread each): "
               "compare encodings within one sweep, not across machines.\n",
               "### Train tokens/s (at train length) and eval tokens/s (batch 1) by eval length\n",
               md_table(pd.concat([tr.rename("train").to_frame(),
                                   pivot(tp, "eval_tokens_per_s", "eval")], axis=1).rename_axis("variant")), "",
               "![throughput](throughput.png)\n",
               "### Peak memory (MiB): one training step, and one eval forward by eval length\n",
               md_table(pd.concat([mem.rename("train").to_frame(),
                                   pivot(tp, "peak_mem_bytes", "eval", scale=MiB)], axis=1).rename_axis("variant")),
               "", "![memory](memory.png)\n"]
    md += report_precision.section(df, paths, out, made, md_table, kernel_max_len)
    plot_training(df, out, made)
    wall = df[df.metric == "train_wall_s"].groupby("variant")["value"].median()
    md += ["## Training\n", "![training](training.png)\n" if "training.png" in made else "",
           md_table(wall.rename("train wall s").to_frame().rename_axis("variant"), "{:.1f}"), ""]
    nan = df[df.value.isna() & df.params.str.contains("nan_reason")]
    if not nan.empty:
        md += ["## Not measurable\n"] + sorted({f"- {r.variant} at {r.eval_len}: {json.loads(r.params)['nan_reason']}"
                                                for r in nan.itertuples()}) + [""]
    report = out / "report.md"
    results.atomic_write(report, "\n".join(md).encode())
    return report


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m harness.report", description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="*", default=["results/sweeps/default"], help="sweep or run dirs")
    p.add_argument("--out", default=None, help="output dir (default: the first path)")
    p.add_argument("--kernel-max-len", type=int, default=MAX_LEN, help="precision section: kernel grid length")
    a = p.parse_args(argv)
    try:
        path = build(a.paths, a.out or a.paths[0], a.kernel_max_len)
    except (ValueError, FileNotFoundError) as e:
        raise SystemExit(f"harness.report: error: {e}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
