"""The kernel-speed gate's floors (`make bench-check`), set from the spread of R over machines of one kind.

The gate's statistic is the best R of 5 runs in one process. It differs between machines of the same kind by
up to 1.5x (memory bandwidth, clocks, neighbours), more than a fixed fraction of one machine's baseline can
absorb. So the committed baseline JSON keeps, under "machines", samples of that statistic from every machine it
was measured on (one per gate or baseline run), and the floor of a key is the geometric midpoint between

  lo = the lowest sample (what an unchanged tree measured on the slowest machine seen), and
  hi / 2 = half the highest sample (the most a kernel made 2x slower can measure on the fastest):

  floor = sqrt(lo * hi / 2).

An unchanged tree passes with margin sqrt(2 lo / hi) over the slowest sample, and a 2x slower kernel fails
by the same margin on the fastest machine, as long as hi < 2 lo (else `floors` raises: no floor does both).
`python -m tests.gate_trials` counts both. A JSON without machines (the GPU baselines) falls back to
(1 - DROP) x its R."""
import math

from harness.measure.kernel_spec import DROP


def spread(doc, key):
    """(lo, hi) of key over doc["machines"]: the lowest and the highest sample."""
    runs = [m[key] for m in doc.get("machines", {}).values() if key in m]
    if not runs:
        return None
    return min(min(r) for r in runs), max(max(r) for r in runs)


def floors(doc):
    """{key: floor} for every key of doc["R"]; ValueError where the machines spread 2x or more (then no floor
    both passes every machine unchanged and fails a 2x slowdown)."""
    out = {}
    for key, ref in doc["R"].items():
        s = spread(doc, key)
        if s is None:
            out[key] = (1 - DROP) * ref
            continue
        lo, hi = s
        if hi >= 2 * lo:
            raise ValueError(f"{key}: R spreads {lo:.3f}..{hi:.3f} over machines (>= 2x): no floor passes the "
                             f"slowest unchanged run and fails a 2x slowdown on the fastest")
        out[key] = math.sqrt(lo * hi / 2)
    return out


def compare(measured, floor):
    """Lines for every gated key whose best R is below its floor."""
    missing = [key for key in floor if key not in measured]
    if missing:
        raise ValueError(f"baseline keys not measured: {missing}; measured {sorted(measured)}")
    return [f"{key}: R {max(measured[key]):.3f} < floor {ref:.3f}"
            for key, ref in floor.items() if max(measured[key]) < ref]
