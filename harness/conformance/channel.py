"""What the worker sends the CLI for one case (isolate.py): observe()'s record as JSON-ready data, and the CLI's
check of it before judging. Tensors travel as dtype, shape and their values in fp64, which is exact for every dtype
the suite hands out and reads back (complex as (re, im) pairs); anything that is not a well-formed record of the
case the CLI asked for (another shape, a dtype torch does not have, rows instead of outputs) is refused here.
"""
import base64
import math

import numpy as np
import torch

from harness.conformance import conventions as C


def pack_tensor(t):
    x = torch.view_as_real(t) if t.is_complex() else t
    return {"dtype": str(t.dtype), "shape": list(t.shape),
            "data": base64.b64encode(x.double().contiguous().numpy().tobytes()).decode("ascii")}


def pack(record):
    """run.observe()'s record as JSON-ready data."""
    out = {}
    for part in ("freq", "rot"):
        r = record[part]
        out[part] = None if r is None else {n: pack_tensor(v) if torch.is_tensor(v) else v for n, v in r.items()}
    return out


def unpack_tensor(d, shape, what):
    if not isinstance(d, dict) or set(d) != {"dtype", "shape", "data"} or not isinstance(d["dtype"], str):
        raise ValueError(f"{what} is not a tensor")
    dtype = getattr(torch, d["dtype"].removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"{what}: no dtype {d['dtype']!r}")
    if not (isinstance(d["shape"], list) and all(type(n) is int and n >= 0 for n in d["shape"])) or (
            shape is not None and tuple(d["shape"]) != tuple(shape)):
        raise ValueError(f"{what}: shape {d['shape']!r}, expected {shape}")
    try:
        raw = np.frombuffer(base64.b64decode(d["data"], validate=True), dtype=np.float64)
    except (ValueError, TypeError):
        raise ValueError(f"{what}: its values are not base64 fp64") from None
    full = list(d["shape"]) + ([2] if dtype.is_complex else [])
    if raw.size != math.prod(full):
        raise ValueError(f"{what}: {raw.size} values for shape {d['shape']}")
    t = torch.from_numpy(raw.copy()).reshape(full)
    return (torch.view_as_complex(t) if dtype.is_complex else t).to(dtype)


def _said(r):
    """r is a skip ({skip}) or an error ({error, type}), all strings."""
    return (set(r) == {"skip"} or set(r) == {"error", "type"}) and all(isinstance(v, str) for v in r.values())


def unpack(packed, case, arrays):
    """pack()'s data back to a record, checked against the case (ValueError naming what is wrong): each part in
    one of its forms, the outputs (H, P, D) for the case's sampled positions and head_dim."""
    if not isinstance(packed, dict) or set(packed) != {"freq", "rot"}:
        raise ValueError("expected the parts freq and rot")
    f, r = packed["freq"], packed["rot"]
    rec = {"freq": None, "rot": None}
    if f is not None:
        if not isinstance(f, dict):
            raise ValueError("freq is not a mapping")
        if _said(f):
            return {"freq": dict(f), "rot": None}
        if set(f) != {"inv", "att"} or type(f["att"]) not in (int, float):
            raise ValueError("freq is none of skip, error, (inv, att)")
        rec["freq"] = {"inv": unpack_tensor(f["inv"], None, "inv_freq").double().flatten(), "att": float(f["att"])}
    if not isinstance(r, dict):
        raise ValueError("rot is not a mapping")
    if _said(r):
        rec["rot"] = dict(r)
        return rec
    if set(r) != {"q", "k", "mutated"} or not (
            isinstance(r["mutated"], list) and all(isinstance(n, str) for n in r["mutated"])):
        raise ValueError("rot is none of skip, error, (q, k, mutated)")
    shape = (C.HEADS, len(arrays["positions"]), case["head_dim"])
    rec["rot"] = {"q": unpack_tensor(r["q"], shape, "q'"), "k": unpack_tensor(r["k"], shape, "k'"),
                  "mutated": list(r["mutated"])}
    return rec
