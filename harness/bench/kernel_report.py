"""`python -m harness.bench.kernel_bench report JSON`: the pytest-benchmark JSON of `make bench` (tests/bench,
R and the environment in each row's extra_info) as a long-format CSV, a printed table with the target R
(harness/bench/kernel_spec.py), and a PNG of R per implementation, next to the JSON."""
import csv
import json
import pathlib

from harness.bench.kernel_spec import SHAPES, target
from harness.bench.kernel_timing import cache_state

CSV_FIELDS = ["kernel", "provider", "mode", "layout", "dtype", "metric", "unit", "x_name", "x_value",
              "p20", "p50", "p80", "R", "target", "device", "cpu_isa", "cache", "torch", "glibc_tunables", "time"]


def report(bench_json):
    """pytest-benchmark JSON (extra_info from tests/bench) -> long CSV + PNG of R next to the JSON."""
    path = pathlib.Path(bench_json)
    doc = json.loads(path.read_text())
    rows = []
    for b in doc["benchmarks"]:
        e = b["extra_info"]
        rows.append(dict(kernel="rope", provider=e["provider"], mode=e["mode"], layout=e["layout"],
                         dtype=e["dtype"], metric="time", unit="s", x_name="shape", x_value=e["shape"],
                         p20=e["p20"], p50=e["p50"], p80=e["p80"], R=e["R"],
                         target=target(e["provider"], e["mode"], e["shape"], "cpu" if e["device"] == "cpu" else "cuda"),
                         device=e["device"], cpu_isa=e.get("cpu_isa", ""), cache=cache_state(e, e["shape"]), torch=e["torch"],
                         glibc_tunables=e["glibc_tunables"],
                         time=doc.get("datetime", "")))
    with open(path.with_suffix(".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, CSV_FIELDS)
        w.writeheader()
        w.writerows(rows)
    print(f"{'provider':10s}{'mode':5s}{'layout':12s}{'dtype':10s}{'shape':9s}{'p50 ms':>9s}{'R':>7s}{'target':>8s}")
    for r in sorted(rows, key=lambda r: (r["x_value"], r["dtype"], r["layout"], r["mode"], -r["R"])):
        tgt = "" if r["target"] is None else (f"{r['target']:.2f} " + ("met" if r["R"] >= r["target"] else "MISSED"))
        print(f"{r['provider']:10s}{r['mode']:5s}{r['layout']:12s}{r['dtype']:10s}{r['x_value']:9s}"
              f"{1e3 * r['p50']:9.3f}{r['R']:7.3f}  {tgt}")
    _plot(rows, path.with_suffix(".png"))
    return rows


COLUMNS = [(m, d, lay) for m in ("fwd", "bwd") for d in ("float32", "bfloat16") for lay in ("half", "interleaved")]
DTYPE_WORDS = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def plot_csv(csv_path, png=None):
    """Redraw the PNG of a report's CSV (e.g. results/baselines/bench-h100.csv) without the JSON; returns its path."""
    path = pathlib.Path(csv_path)
    with open(path, newline="") as f:
        rows = [{**r, "R": float(r["R"]), "target": float(r["target"]) if r.get("target") else None}
                for r in csv.DictReader(f)]
    png = pathlib.Path(png) if png else path.with_suffix(".png")
    _plot(rows, png)
    return png


def _plot(rows, png):
    """One heatmap per shape: R (bytes/s over a plain copy's) per implementation (rows) and pass (columns: fwd/bwd x
    dtype x layout), the value in each cell, and the target where one is set with whether it is met."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    shapes = [s for s in SHAPES if any(r["x_value"] == s for r in rows)]
    shapes += sorted({r["x_value"] for r in rows} - set(shapes))
    providers = sorted({r["provider"] for r in rows if r["provider"] != "copy"})  # copy: R = 1 by definition
    device = sorted({r["device"] for r in rows})
    fig, axes = plt.subplots(1, len(shapes), figsize=(6.2 * len(shapes) + 1.2, 0.5 * len(providers) + 2.6),
                             squeeze=False, layout="constrained")
    im = None
    for ax, shape in zip(axes[0], shapes):
        at = {(r["provider"], r["mode"], r["dtype"], r["layout"]): r for r in rows if r["x_value"] == shape}
        grid = np.full((len(providers), len(COLUMNS)), np.nan)
        for i, prov in enumerate(providers):
            for j, key in enumerate(COLUMNS):
                r = at.get((prov, *key))
                if r is None:
                    continue
                grid[i, j] = r["R"]
                text = f"{r['R']:.2f}"
                if r["target"] is not None:
                    text += f"\n≥{r['target']:.2f} " + ("met" if r["R"] >= r["target"] else "MISSED")
                ax.text(j, i, text, ha="center", va="center", fontsize=7, color="k" if r["R"] > 0.55 else "w")
        im = ax.imshow(grid, vmin=0, vmax=max(1.5, np.nanmax(grid)), cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(COLUMNS)), [f"{m}\n{DTYPE_WORDS.get(d, d)}\n{lay}" for m, d, lay in COLUMNS],
                      fontsize=8)
        ax.set_yticks(range(len(providers)), providers, fontsize=9)
        dims = ", ".join(f"{k} {v}" for k, v in SHAPES.get(shape, {}).items())
        ax.set_title(f"{shape} ({dims})", fontsize=10)
        ax.tick_params(length=0)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.9, label="R: bytes/s over a plain copy's (higher is better)")
    fig.suptitle(f"RoPE kernels on {', '.join(device)}: R per implementation and pass (blank: not measured; "
                 f"≥: the target R where kernel_spec sets one)", fontsize=11)
    fig.savefig(png, dpi=110, bbox_inches="tight")
    plt.close(fig)
