"""Labels of the report's rows. A *variant* is the encoding name, plus the params that differ between runs
of that encoding (e.g. `rope base=100`), plus `+<extension>` for RoPE eval-time extension rows, plus the
model, train steps, train length or task when the results hold several, plus the differing overrides (or
sweep) of runs that would otherwise share a label and a seed; the seed is never part of it."""
import json
import re

import numpy as np
import pandas as pd

EXTENSION_KEYS = ("extension", "factor", "rope_type", "scaling", "finetune_steps", "finetune_len",
                  "finetune_status", "nan_reason")
# how/where a row was measured (torchrun ranks, nll_by_pos bins, the model-level precision study's knobs, effective
# length bars, attention layers, decoding paths, the CPU kernel's dispatch level): never part of a label; tests/test_report.py checks the
# measurement code's params are all listed here
MEASUREMENT_KEYS = ("world_size", "pos_lo", "pos_hi", "seq_len", "shift", "anchor_shift", "bar", "base_len",
                    "base_score", "layer", "eps", "batch_size", "new_tokens", "path", "decode", "cpu_isa")


def train_steps(df: pd.DataFrame) -> pd.Series:
    """Per row: the value of its run's `train_steps` row (NaN for a run without one). A run is keyed by
    more than its run_id, so that two sweeps that reuse run ids (same overrides) stay apart."""
    key = ["sweep", "run_id", "model", "seed"]
    steps = df[df.metric == "train_steps"].groupby(key, dropna=False)["value"].max().rename("_steps")
    return df[key].join(steps, on=key)["_steps"].astype(float)


def _overrides(run_id: str) -> tuple:
    """A run id's override set without the seed, as sorted (key, value) pairs: `sweep/encoding=rope,train.lr=0.003,
    seed=1` -> (('encoding', 'rope'), ('train.lr', '0.003')). Commas inside brackets stay in their value; the
    hashed tail of a long name (harness.config.resolvers.run_name: it hashes the seed too) is left out."""
    items = re.split(r",(?![^\[]*\])", run_id.rpartition("/")[2])
    items = [i for i in items if not i.startswith("seed=") and not re.search(r"-[0-9a-f]{12}$", i)]
    return tuple(sorted(tuple(i.split("=", 1)) if "=" in i else (i, "") for i in items))


def _distinct_runs(df: pd.DataFrame, label: pd.Series) -> pd.Series:
    """A suffix per row that keeps apart runs whose label and seed coincide but whose configs differ (a sweep
    over train.lr; two sweeps with one label): their differing overrides and sweeps (else their run ids). Without it
    their rows would be averaged as one seed under one label."""
    run = pd.Series(list(zip(df["sweep"].astype(str), df["run_id"].astype(str))), index=df.index)
    runs = pd.DataFrame({"label": label, "seed": df["seed"], "run": run}).drop_duplicates()
    suffix = {}
    for _, g in runs.groupby(["label", "seed"], dropna=False):
        if g.run.nunique() < 2:
            continue
        parsed = {r: {"sweep": r[0], **dict(_overrides(r[1]))} for r in g.run.unique()}
        keys = sorted({k for o in parsed.values() for k in o})
        varying = [k for k in keys if len({o.get(k) for o in parsed.values()}) > 1]
        part = {r: "".join(f" {k}={o.get(k, '-')}" for k in varying) for r, o in parsed.items()}
        if len(set(part.values())) < len(parsed):  # not told apart (hashed long names): their run ids
            part = {r: f" run={r[1]}" for r in parsed}
        suffix.update(part)
    return run.map(lambda r: suffix.get(r, ""))


def variants(df: pd.DataFrame, drop=()) -> pd.Series:
    """A readable label per row (see module docstring); drop: parts left out ("model", "steps",
    "train_len", "task")."""
    # work on the distinct (encoding, params) pairs: a few dozen, where the rows are thousands
    pairs = df[["encoding", "params"]].drop_duplicates()
    parsed = {p: json.loads(p) for p in pairs.params.unique()}
    skip = EXTENSION_KEYS + MEASUREMENT_KEYS
    own = {p: {k: v for k, v in q.items() if k not in skip} for p, q in parsed.items()}
    core = {}
    for enc, g in pairs.groupby("encoding"):
        keys = sorted({k for p in g.params for k in own[p]})
        varying = [k for k in keys if len({json.dumps(own[p].get(k), sort_keys=True) for p in g.params}) > 1]
        for p in g.params:
            # a knob a run's params lack was left at its default (params carry model knobs only when set)
            core[(enc, p)] = " ".join([str(enc)] + [f"{k}={own[p].get(k, 'default')}" for k in varying])
    label = pd.Series([core[k] for k in zip(df["encoding"], df["params"])], index=df.index, dtype=object)
    steps = train_steps(df)
    parts = (("model", df["model"].astype(str)),
             ("steps", steps.map(lambda s: "?" if np.isnan(s) else f"{s:.0f}")),
             ("train_len", df["train_len"].astype(str)), ("task", df["task"].astype(str)))
    full = label  # every part: runs that differ only in a dropped part are meant to share the short label
    for name, col in parts:
        if col.nunique() > 1:
            full = full + " " + name + "=" + col
            label = label if name in drop else label + " " + name + "=" + col
    label = label + _distinct_runs(df, full)
    ext = {p: ("+" + q["extension"] + (f" ft{q['finetune_len']}" if "finetune_len" in q else ""))
           if "extension" in q else "" for p, q in parsed.items()}
    return label + df["params"].map(ext)


def prepare(df: pd.DataFrame) -> pd.DataFrame:
    """The rows plus the report's columns: variant (full label), short (without model/steps/train_len/task:
    the label inside one comparison group), pair (without model/steps: matches a variant across budgets),
    steps, budget, group (task + budget + train length: the variants that are paired), ext (an eval-time
    extension row), rel (eval_len / train_len)."""
    df = df.copy()
    df["variant"] = variants(df)
    df["short"] = variants(df, drop=("model", "steps", "train_len", "task"))
    df["pair"] = variants(df, drop=("model", "steps"))
    df["steps"] = train_steps(df)
    steps = df.steps.map(lambda s: "?" if np.isnan(s) else f"{s:.0f}")
    df["budget"] = "model=" + df.model.astype(str) + " steps=" + steps
    df["ext"] = df["params"].str.contains('"extension"')
    df["rel"] = df["eval_len"].astype(float) / df["train_len"].astype(float)
    group = "Task `" + df.task.astype(str) + "`"
    if df.budget.nunique() > 1:
        group = group + ", " + df.budget
    if df.train_len.nunique() > 1:
        group = group + ", train_len=" + df.train_len.astype(str)
    df["group"] = group
    return df


# ---- the one naming function of the figures: a variant (or a budget, a group) in words, no override syntax
_KEY_WORDS = {"qk_norm": "QK-norm", "train_len": "trained at", "n_layers": "layers", "d_model": "width",
              "finetune_len": "fine-tuned at"}
_SCALE = ("model", "steps", "train_len", "task", "sweep", "run")  # after the encoding's own params, in this order
_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z_][\w.]*)=")


def _model_words(m):
    """`ladder16x` -> `16x ladder`, `tiny` -> `tiny model`."""
    rung = re.fullmatch(r"ladder(\d+x)", m)
    return f"{rung.group(1)} ladder" if rung else f"{m} model"


def _segment(text):
    ext = ""
    tail = re.search(r"\+([\w.-]+)(?: ft(\d+))?$", text)
    if tail:  # a RoPE extension row: `+yarn ft128`
        ext = f" + {tail.group(1)}" + (f" (fine-tuned at {tail.group(2)})" if tail.group(2) else "")
        text = text[:tail.start()]
    keys = list(_KEY.finditer(text))
    if not keys:
        return text.strip() + ext
    name = text[:keys[0].start()].strip()
    kv = {m.group(1): text[m.end():(keys[i + 1].start() if i + 1 < len(keys) else len(text))].strip()
          for i, m in enumerate(keys)}
    own = [f"{_KEY_WORDS.get(k, k.replace('_', ' ').replace('.', ' '))} {v}" for k, v in kv.items()
           if k not in _SCALE]
    words = " ".join([name] + [", ".join(own)] if own else [name]).strip()
    scale = []
    if "model" in kv:
        scale.append(_model_words(kv["model"]) + (f" ({kv['steps']} steps)" if "steps" in kv else ""))
    elif "steps" in kv:
        scale.append(f"{kv['steps']} steps")
    scale += [f"{_KEY_WORDS.get(k, k)} {kv[k]}" for k in ("train_len", "task", "sweep") if k in kv]
    if "run" in kv:
        scale.append("run " + kv["run"].replace("=", " "))
    return ", ".join(p for p in [words] + scale if p).replace("=", " ") + ext


def human(label):
    """The label a figure shows for a variant, budget or group label of `prepare` (or a claim's series): the
    encoding, its params in words, then the scale, never Hydra override syntax. `rope base=100` -> `rope base 100`;
    `learned model=ladder16x steps=1137` -> `learned, 16x ladder (1137 steps)`; `model=tiny steps=300` -> `tiny
    model (300 steps)`; `rope qk_norm=rms+yarn ft128` -> `rope QK-norm rms + yarn (fine-tuned at 128)`; `Task `lm`,
    model=tiny steps=300, train_len=64` -> `Task `lm`, tiny model (300 steps), trained at 64`. Every figure names
    its variants through this function (tests/test_figures.py checks no figure text holds `key=value`)."""
    text = str(label)
    return ", ".join(_segment(s) for s in re.split(r", (?=[A-Za-z_][\w.]*=)", text))
