"""The report's long-context pieces: loss by position, effective length, RULER's string match, attention
statistics and KV-cache decoding (rows of harness.measure.{extrapolation, effective_length, attention,
decode_bench}). Every number is a mean over seeds with its 95% interval of the metric's kind (harness.report.bounds
via report_tables)."""
import json

import pandas as pd

from harness.report import bounds
from harness.report import budget as report_budget
from harness.report import families
from harness.report.plots import fig_bars, fig_curves, save
from harness.report.style import label
from harness.report.tables import ci_cells, ci_table, render, select, table

MiB = 2 ** 20
PRIMARY = ("ruler_all", "acc", "byte_acc")  # the score the effective-length plot shows: the first present
RULES = {"absolute": "score ≥ eval.effective_length.threshold",
         "relative": "score ≥ eval.effective_length.relative × the score at the train length"}


def nll_by_pos(tdf, out, made, task, reference=None):
    """Mean NLL per position bin (train-length bins) with bands in the longest window, one panel per family (and
    per budget, with several). [] when there are no nll_by_pos rows."""
    d = select(tdf, "nll_by_pos", "nonoverlapping")
    if d is None:
        return []
    L = int(d.eval_len.max())
    d = d[d.eval_len == L]
    d = d.assign(pos=[(q["pos_lo"] + q["pos_hi"]) / 2 for q in d.params.map(json.loads)])  # bin centre
    key, panels = "variant", None
    if d.budget.nunique() > 1:
        key, panels = "pair", list(report_budget.budget_table(d).index)
        d = d.assign(panel=d.budget)
    s = bounds.summarize(d.assign(variant=d[key]), (["panel"] if panels else []) + ["variant", "pos"])
    groups, ref = families.of_rows(d, reference, key)
    name = f"nll_by_pos_{task}.png"
    save(fig_curves(s, "pos", f"{task}: mean NLL by position in a {L}-token window (bins of the train length)",
                    label("pos") + " (bin centre; dotted: train length)", label("nll_by_pos"),
                    sorted(d.train_len.unique()), logy=False, logx=False, panels=panels, groups=groups, reference=ref),
         out, name, made)
    return ["### Loss by position\n", "Where a curve turns up is where the encoding stops extrapolating. Drawn for the "
            f"longest window ({L} tokens) only: a causal model's loss at a position does not depend on the window "
            "around it, so shorter windows differ only by the text they score (and for encodings whose positions "
            "depend on the call, xPos).\n", f"![nll by position]({name})\n"]


def longest(tdf, score):
    """The longest length the score `score` was evaluated at (an effective length there is censored)."""
    lens = tdf.loc[tdf.metric == score, "eval_len"].dropna()
    return int(lens.max()) if len(lens) else None


def censored(g, top):
    """{(variant, rule)} whose effective length reached `top` on some seed: the mean is a lower bound there."""
    if top is None:
        return set()
    hit = g[g.value >= top]
    return set(zip(hit.variant, hit.rule))


def effective_length(tdf, out, made, task):
    """Effective length per score (protocol `<score>:<protocol>`): table variant x rule, the relative rule's bars."""
    d = tdf[tdf.metric.str.startswith("effective_len_")]
    if d.empty:
        return []
    d = d.assign(rule=d.metric.str.removeprefix("effective_len_"), score=d.protocol.str.partition(":")[0])
    md = ["### Effective length\n", "The longest evaluated length up to which the score stays at or above the bar "
          "(RULER, Hsieh et al. 2024; relative bar: NoLiMa, Modarressi et al. 2025), per seed, then over seeds; "
          "0 = below the bar already at the shortest length. " + "; ".join(f"{r}: {t}" for r, t in RULES.items())
          + ".\n"]
    marked = False
    for proto, g in d.groupby("protocol"):
        top = longest(tdf, proto.partition(":")[0])
        cells, head = ci_cells(g, "rule", False)
        for v, rule in censored(g, top):
            cells.loc[v, rule] = "≥ " + cells.loc[v, rule]
            marked = True
        md += [f"Score `{proto}`:\n", head + "\n", render(cells), ""]
    if marked:
        md += ["≥: the score stayed at or above the bar up to the longest length evaluated on at least one seed, so "
               "the effective length is at least this (censored: longer evaluations could only raise it).\n"]
    primary = next(s for s in PRIMARY if s in set(d.score))
    rel = d[(d.score == primary) & (d.rule == "relative")]
    top = longest(tdf, primary)
    name = f"effective_length_{task}.png"
    save(fig_bars(bounds.summarize(rel, "variant"), f"{task}: effective length, relative rule ({rel.protocol.iloc[0]})",
                  label("effective_len_relative"), censored={v for v, _ in censored(rel, top)},
                  note=f"≥ / ▶: reached {top}, the longest length evaluated, on some seed: a lower bound"),
         out, name, made)
    return md + [f"![effective length]({name})\n"]


def ruler(tdf):
    """RULER's string match of the generated answer (all references found), mean over depths per seed."""
    d = select(tdf, "ruler_all")
    if d is None:
        return []
    paths = sorted({json.loads(p).get("decode", "?") for p in d.params})
    return table(d, "RULER string match (all references in the greedy answer; mean over depths)") + [
        f"Decoded with: {', '.join(paths)} (kv_cache where the encoding can decode with one).\n"]


def attention(tdf, out, made, task, train_lens, reference=None):
    """Sink rate and first-token attention at the 64-token probes, entropy per layer vs length."""
    sink, ent = select(tdf, "sink_rate"), select(tdf, "attn_entropy")
    if sink is None and ent is None:
        return []
    md = ["### Attention statistics\n", "Sink rate: share of (layer, head) whose mean attention to the first token "
          "α₁ exceeds 0.3 on 64-token probes (Gu et al., ICLR 2025); entropy in nats, mean over layers, heads and "
          "query rows (flat attention over T keys: about log T − 1).\n"]
    if sink is not None:
        first = select(tdf, "first_token_attn")
        parts = [sink.assign(col="sink rate")]
        if first is not None:
            parts.append(first.assign(col="α₁ layer " + first.params.map(lambda q: str(json.loads(q)["layer"]))))
        md += ci_table(pd.concat(parts), "col", None)
    if ent is not None:
        mean = ent.groupby(["variant", "seed", "eval_len", "train_len", "budget"], as_index=False).value.mean()
        name = f"attention_entropy_{task}.png"
        groups, ref = families.of_rows(ent, reference)
        save(fig_curves(bounds.summarize(mean, ["variant", "eval_len"], bounds.kind_of(ent)), "eval_len", f"{task}: attention entropy "
                        "vs eval length (mean over layers)", label("eval_len", log=True) + "; dotted: train length",
                        label("attn_entropy"), train_lens, logy=False, groups=groups, reference=ref), out, name, made)
        md += table(ent, "Attention entropy (nats, mean over layers)") + [f"![attention entropy]({name})\n"]
    return md


def decode(tdf):
    """KV-cache decoding: tokens/s and cache bytes at every context length."""
    tps, kv = select(tdf, "decode_tokens_per_s"), select(tdf, "kv_cache_bytes")
    if tps is None:
        return []
    p = json.loads(tps.params.iloc[0])
    md = table(tps, f"KV-cache decoding, tokens/s after a prefill of eval_len tokens (batch {p.get('batch_size')}, "
                     f"{p.get('new_tokens')} new tokens, median of repeats)")
    if kv is not None:
        md += table(kv, "KV-cache size after the prefill (MiB)", scale=MiB)
    return md


def section(tdf, out, made, task, train_lens, reference=None):
    """The long-context parts of a task's section, in reading order."""
    return (nll_by_pos(tdf, out, made, task, reference) + effective_length(tdf, out, made, task) + ruler(tdf)
            + attention(tdf, out, made, task, train_lens, reference) + decode(tdf))
