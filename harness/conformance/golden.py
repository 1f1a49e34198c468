"""The golden file: generate() computes it from the fp64 oracle (cases.py), load() reads it back.

Layout of golden.npz: `meta` (a JSON string: the case list, format version), `q_d{D}`, `k_d{D}` (the shared
seeded inputs, (P, D)), and per case `{id}/{name}` for inv_freq, attention_factor, positions, cos, sin and,
per layout, q_rot_, k_rot_, logits_ (cases.golden_case). All floats fp64, positions int64.
Regenerate: `python -m harness.conformance --generate` (tests/test_conformance.py checks the shipped file
equals a regeneration).
"""
import io
import json
import pathlib
import zipfile

import numpy as np

from harness.conformance import cases as C

PATH = pathlib.Path(__file__).with_name("golden.npz")
VERSION = 1


def generate():
    """{name: numpy array} for every case; deterministic (elementwise fp64 maths, fixed seeds)."""
    case_list = C.cases()
    data = {"meta": np.array(json.dumps({"version": VERSION, "cases": case_list}))}
    for case in case_list:
        arrays = C.golden_case(case)
        d = case["head_dim"]
        for shared in ("q", "k"):
            data.setdefault(f"{shared}_d{d}", arrays[shared])
            del arrays[shared]
        data.update({f"{case['id']}/{name}": a for name, a in arrays.items()})
    return data


def write(path=PATH):
    """Regenerate and write the golden file; returns (path, bytes)."""
    buf = io.BytesIO()
    np.savez_compressed(buf, **generate())
    pathlib.Path(path).write_bytes(buf.getvalue())
    return path, len(buf.getvalue())


def load(path=PATH):
    """(case list, {name: array}) from the golden file."""
    try:
        with np.load(path) as z:
            data = {name: z[name] for name in z.files}
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise ValueError(f"cannot read the golden file {path}: {e}; regenerate it with "
                         f"`python -m harness.conformance --generate`") from None
    meta = json.loads(str(data.pop("meta")))
    if meta.get("version") != VERSION:
        raise ValueError(f"golden file {path} has version {meta.get('version')}, this code reads {VERSION}")
    return meta["cases"], data


def case_arrays(data, case):
    """The arrays of one case, the shared q, k included."""
    prefix = f"{case['id']}/"
    out = {n[len(prefix):]: a for n, a in data.items() if n.startswith(prefix)}
    out["q"], out["k"] = data[f"q_d{case['head_dim']}"], data[f"k_d{case['head_dim']}"]
    return out
