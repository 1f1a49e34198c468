"""lm-eval's option syntax, as its CLI reads it: `k=v,k2=v2` lists whose values may hold commas inside brackets or
quotes, typed values (true/false, numbers, Python literals), JSON objects, and --seed's one-or-four integers.
harness.lmeval.cli parses its options with these; a mistake is one UsageError line."""
import ast
import json
import re

from harness.lmeval.model import UsageError

SEEDS = ("random_seed", "numpy_random_seed", "torch_random_seed", "fewshot_random_seed")
DEFAULT_SEEDS = (0, 1234, 1234, 1234)  # simple_evaluate's

# `a=1,b=[2,3],c='x,y'` -> a=1 | b=[2,3] | c='x,y': a comma inside brackets or quotes (one level) is the value's
ITEM = re.compile(r"""(?:\[[^]]*\]|\([^)]*\)|\{[^}]*\}|'[^']*'|"[^"]*"|[^,])+""")


def typed_value(text):
    """A `k=v` value as lm-eval's CLI types it: true/false, an int, a float, a Python literal, else the text."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for cast in (int, float, ast.literal_eval):
        try:
            return cast(text)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
    return text


def key_values(text):
    """`k=v,k2=v2` as a dict; ValueError naming an item without `=`."""
    out = {}
    for item in ITEM.findall(text):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"expected key=value, got {item!r}")
        out[key.strip()] = typed_value(value)
    return out


def dict_option(option, values, parse=key_values):
    """One dict of an option's values, each a JSON object or `k=v,k2=v2` (parse: --model_args' run may hold commas)."""
    merged = {}
    for text in values or ():
        try:
            merged.update(json.loads(text) if text.lstrip().startswith("{") else parse(text))
        except ValueError as e:  # json's JSONDecodeError, key_values'
            raise UsageError(f"argument {option}: {e}; expected k=v,k2=v2 or a JSON object") from None
    return merged


def seed_option(text):
    """--seed: one integer for all four seeds, or python,numpy,torch,fewshot (None: not seeded), as lm-eval's."""
    try:
        seeds = [None if s.strip().lower() == "none" else int(s) for s in text.split(",")]
    except ValueError:
        seeds = []
    seeds = seeds * 4 if len(seeds) == 1 else seeds + list(DEFAULT_SEEDS[3:]) if len(seeds) == 3 else seeds
    if len(seeds) != 4:
        raise UsageError(f"--seed: expected one integer, or python,numpy,torch,fewshot integers (None leaves one "
                         f"unseeded), e.g. 0,1234,1234,1234; got {text!r}")
    return dict(zip(SEEDS, seeds))
