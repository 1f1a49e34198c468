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


def _plot(rows, png):
    """One panel per shape: R per provider (bars: fwd/bwd x dtype x layout), target lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shapes = sorted({r["x_value"] for r in rows})
    fig, axes = plt.subplots(1, len(shapes), figsize=(7 * len(shapes), 4), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        sel = sorted((r for r in rows if r["x_value"] == shape), key=lambda r: (r["provider"], r["mode"]))
        labels = [f"{r['provider']}\n{r['mode']} {r['dtype'][:4]} {r['layout'][:4]}" for r in sel]
        ax.bar(range(len(sel)), [r["R"] for r in sel], color=["C0" if r["mode"] == "fwd" else "C1" for r in sel])
        for i, r in enumerate(sel):
            if r["target"] is not None:
                ax.hlines(r["target"], i - 0.4, i + 0.4, colors="k", linestyles="--")
        ax.set_xticks(range(len(sel)), labels, rotation=90, fontsize=6)
        ax.set_ylabel("R = bytes/s / copy bytes/s")
        ax.set_title(f"RoPE {shape} ({SHAPES[shape]}); dashed: target")
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)
