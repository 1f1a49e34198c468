"""Importing the code under test and its frequency functions; the conventions are conventions.py's.

--frequencies: a mapping rope_type -> fn, HF's (config, device, seq_len) or ours (head_dim, base, seq_len, **p).
The ready adapters for installed libraries (`--library NAME`) are in harness/conformance/libraries/; the names
below (hf_llama, rotary_embedding_torch, torchtune) are kept for `--apply harness.conformance.adapters:NAME`.
"""
import copy
import importlib
import inspect

import torch

from harness.conformance.conventions import CONVENTIONS, check_signature, guarded  # noqa: F401 (re-exported)


def resolve(spec, what):
    """The object named by 'pkg.module:attr' (attr may be dotted); ValueError in one line otherwise."""
    if spec.count(":") != 1:
        raise ValueError(f"{what} {spec!r}: expected pkg.module:function")
    mod_name, attr = spec.split(":")
    try:
        obj = importlib.import_module(mod_name)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # an import error inside their package is theirs, said in one line (sys.exit too)
        raise ValueError(f"{what} {spec!r}: cannot import {mod_name}: {describe(e)}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{what} {spec!r}: {mod_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def describe(e):
    """An exception from code under test in one line: its type and the first line of its message."""
    if isinstance(e, SystemExit):
        return f"SystemExit({e.code!r}): it tried to end the process"
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def llama_config(rope):
    """A transformers LlamaConfig carrying the case (v5 rope_parameters)."""
    from transformers import LlamaConfig
    params = {n: v for n, v in rope.items() if n not in ("head_dim", "max_position_embeddings")}
    return LlamaConfig(head_dim=rope["head_dim"], hidden_size=rope["head_dim"] * 2, num_attention_heads=2,
                       num_key_value_heads=2, max_position_embeddings=rope["max_position_embeddings"],
                       rope_parameters=params)


def frequencies(fn, case, rope):
    """(inv_freq fp64, attention_factor) from a provider's frequency function, HF's or ours."""
    first = next(iter(inspect.signature(fn).parameters), None)
    if first == "config":
        inv, att = fn(llama_config(rope), None, seq_len=case["seq_len"])
    else:
        kw = copy.deepcopy(case["params"])  # its own lists: a provider that edits them cannot edit the case
        if case["partial_rotary_factor"] != 1.0:
            kw["partial_rotary_factor"] = case["partial_rotary_factor"]
        inv, att = fn(case["head_dim"], case["base"], case["seq_len"], **kw)
    return torch.as_tensor(inv).double().flatten(), float(att)


# ---- the library adapters of earlier releases, by their old names ----

def hf_llama(q, k, positions, *, rope):
    from harness.conformance.libraries import transformers as lib
    return lib.llama(q, k, positions, rope=rope)


def rotary_embedding_torch(q, k, positions, *, rope):
    from harness.conformance.libraries import rotary_embedding_torch as lib
    return lib.rotate_queries_or_keys(q, k, positions, rope=rope)


def torchtune(q, k, positions, *, rope):
    from harness.conformance.libraries import torchtune as lib
    return lib.rope(q, k, positions, rope=rope)
