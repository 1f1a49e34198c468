"""The pretrained study's rows as a frame with their knobs as columns: what the report, the claims and the transfer
statistics select on."""
import json

from harness.pretrained.variants import EXTENSIONS

ORDER = list(EXTENSIONS)  # the study's variants in their registry order: tables and legends list them so


def prepare(df):
    """The pretrained rows with their knobs as columns: variant (extension, `xF` where F != 1), impl, corpus,
    pipeline, pos_lo, and a retrieval row's needle and depth."""
    d = df[df.params.str.contains('"pretrained"')].copy()
    p = d.params.map(json.loads)
    d["extension"] = p.map(lambda q: q["extension"])
    d["variant"] = p.map(lambda q: label(q["extension"], q["factor"]))
    for key in ("rope_impl", "corpus", "pipeline", "pos_lo", "needle", "depth"):
        d[key] = p.map(lambda q, k=key: q.get(k))
    return d


def label(extension, factor):
    """A variant's label, on the real model and the laptop alike: `none`, `dynamic` (factor 1), `yarn x2`."""
    return extension if extension == "none" or factor == 1 else f"{extension} x{factor:g}"


def lm_rows(d, corpus="pystdlib"):
    """The bits-per-byte rows of the harness's RoPE (not transformers' reference forward) on one corpus."""
    return d[(d.metric == "bpb") & (d.rope_impl == "harness") & (d.corpus == corpus) & d.pipeline.isna()]


def order(names):
    """Variant labels ("yarn x2") in the registry order of their extension, unknown ones last."""
    return sorted(names, key=lambda v: (ORDER.index(v.split(" ")[0]) if v.split(" ")[0] in ORDER else 99, v))
