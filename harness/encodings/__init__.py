"""Registry of positional encodings: one module per encoding, registered under its file name."""
import importlib
import inspect
import pkgutil

from harness.encodings import _params
from harness.encodings._base import Encoding, RotaryEncoding

# Model dimensions the model always offers; an encoding takes those its constructor names.
MODEL_DIMS = ("d_model", "n_heads", "head_dim", "n_layers")


def _discover():
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        classes = [c for c in vars(module).values() if inspect.isclass(c) and issubclass(c, Encoding)
                   and c.__module__ == module.__name__]
        if len(classes) != 1:
            raise TypeError(f"{module.__name__} must define exactly one Encoding subclass, found {classes}")
        classes[0].name = info.name  # one name everywhere: file, YAML, results rows
        found[info.name] = classes[0]
    return dict(sorted(found.items()))


ENCODINGS = _discover()


def parameters(name):
    """The keyword parameters encoding `name` takes (its constructor's signature is its schema)."""
    return list(inspect.signature(ENCODINGS[name]).parameters)


def ranges(name):
    """{parameter: Range} of encoding `name` (harness.encodings._params: the shared names' and its own file's)."""
    if name not in ENCODINGS:
        raise ValueError(f"unknown encoding {name!r}; expected one of {list(ENCODINGS)}")
    return _params.ranges(ENCODINGS[name])


def build(name, **params):
    """Instantiate encoding `name`. Model dims it does not use are dropped; any other unknown key is an error."""
    if name not in ENCODINGS:
        raise ValueError(f"unknown encoding {name!r}; expected one of {list(ENCODINGS)}")
    accepted = parameters(name)
    unknown = sorted(k for k in params if k not in accepted and k not in MODEL_DIMS)
    if unknown:
        user = [p for p in accepted if p not in MODEL_DIMS]
        raise ValueError(f"encoding {name!r} does not take {unknown}; its parameters: {user}")
    return ENCODINGS[name](**{k: v for k, v in params.items() if k in accepted})


__all__ = ["ENCODINGS", "Encoding", "RotaryEncoding", "build", "parameters", "ranges"]
