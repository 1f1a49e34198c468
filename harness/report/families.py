"""Encoding families and the panels of a figure: at most `CAP` curves a panel, variants grouped by family.

A family is read off the encoding object (harness.encodings), never off its name (DESIGN.md §6.2): a per-layer
policy (members of different kinds over its cycle, `at`/`period`), a content bias or a normalizer other than
softmax (`content_bias`, `replaces_softmax`), an absolute encoding (`embed` overridden; an encoding with no hook
at all, NoPE, is shown beside them), an additive score bias (`has_bias`), a rotation (`rotate` overridden).
A row whose encoding is not registered is `other`."""
import functools
import math

from harness.encodings import ENCODINGS, Encoding, build

CAP = 8  # curves a panel holds at most, the reference curve included
FAMILIES = ("absolute / none", "rotary", "bias", "per-layer", "content / normalizer", "other")
DIMS = dict(d_model=64, n_heads=2, head_dim=32, n_layers=2)  # a small instance: the attributes do not depend on it


@functools.cache
def family(name) -> str:
    """The family of a registered encoding (see the module docstring), `other` for anything else."""
    cls = ENCODINGS.get(name)
    if cls is None:
        return "other"
    try:
        enc = build(name, **DIMS)
    except (TypeError, ValueError):  # a constructor that needs more than the model dims: class attributes only
        enc = None
    period = getattr(enc, "period", 1)
    if enc is not None and len({type(enc.at(i)) for i in range(period)}) > 1:
        return "per-layer"
    if cls.content_bias or cls.normalize is not Encoding.normalize:
        return "content / normalizer"
    hooks = {h: getattr(cls, h) is not getattr(Encoding, h) for h in ("embed", "rotate", "bias", "scores_bias")}
    if hooks["embed"] or not any(hooks.values()):
        return "absolute / none"
    if hooks["bias"] or hooks["scores_bias"]:
        return "bias"
    return "rotary"


def _chunks(items, size):
    """items split into the fewest near-equal chunks of at most `size`."""
    if not items:
        return []
    k = math.ceil(len(items) / max(size, 1))
    step = math.ceil(len(items) / k)
    return [items[i:i + step] for i in range(0, len(items), step)]


def panels(group_of, reference=None, cap=CAP, order=FAMILIES):
    """[(title, [variants])]: one panel per group (family), in `order` then by name, split into near-equal
    panels where a group holds more than fits; `reference` (when among the variants) joins every panel and
    counts in its cap. group_of: {variant: group}. With at most `cap` variants in all: one untitled panel."""
    variants = sorted(group_of)
    if len(variants) <= cap:
        return [("", variants)]
    ref = reference if reference in group_of else None
    rank = {g: i for i, g in enumerate(order)}
    groups = sorted({g for v, g in group_of.items() if v != ref}, key=lambda g: (rank.get(g, len(order)), g))
    out = []
    for g in groups:
        members = [v for v in variants if group_of[v] == g and v != ref]
        parts = _chunks(members, cap - (ref is not None))
        for i, part in enumerate(parts):
            title = g if len(parts) == 1 else f"{g or 'part'} ({i + 1}/{len(parts)})"
            out.append((title, ([ref] if ref else []) + part))
    return out


def by_family(rows, key="variant"):
    """{label: family} from rows holding `key` and `encoding`."""
    pairs = rows[[key, "encoding"]].drop_duplicates()
    return {str(v): family(str(e)) for v, e in zip(pairs[key], pairs["encoding"])}


def of_rows(rows, reference=None, key="variant"):
    """(panels, reference label) for report rows (harness.report.prepare's columns) whose curves are labelled by
    `key`: the reference is the `key` label of the rows whose short label is `reference`, when that is one."""
    ref = None
    if reference is not None and "short" in rows:
        vals = rows.loc[rows["short"] == reference, key].unique()
        ref = str(vals[0]) if len(vals) == 1 else None
    return panels(by_family(rows, key), ref), ref
