"""The kernel-speed gate's R floors (`make bench-check`).

R (kernel bytes/s over copy_ bytes/s, best of 5 runs in one process) is what a user of the kernel cares about,
but it is a timing: on a machine at load average 15 it read from 0.09 to 4.7 for an unchanged tree, and it differs
between machines of one kind by up to 1.5x. So on the CPU the gate rests on a statistic load cannot move,
instructions per element of the C kernel against committed ceilings (harness/bench/kernel_icount.py), and R's
floor is only LOOSE x the committed R: it catches a kernel several times slower (or one that fell back to a slow
path), never a busy machine. A baseline without instruction counts (the GPU JSONs) keeps the tight floor
(1 - DROP) x its R.

The baseline JSON also keeps, under "machines", samples of the best-of-5 R from every machine and trial it was
measured on (`spread`; `python -m harness.bench.gate_trials --estimate` reads them)."""
from harness.bench.kernel_spec import DROP, LOOSE


def spread(doc, key):
    """(lo, hi) of key over doc["machines"]: the lowest and the highest sample."""
    runs = [m[key] for m in doc.get("machines", {}).values() if key in m]
    if not runs:
        return None
    return min(min(r) for r in runs), max(max(r) for r in runs)


def floors(doc):
    """{key: floor} for every key of doc["R"]: LOOSE x R where doc has instruction ceilings, else (1 - DROP) x R."""
    scale = LOOSE if "instructions" in doc else 1 - DROP
    return {key: scale * ref for key, ref in doc["R"].items()}


def compare(measured, floor):
    """Lines for every gated key whose best R is below its floor."""
    missing = [key for key in floor if key not in measured]
    if missing:
        raise ValueError(f"baseline keys not measured: {missing}; measured {sorted(measured)}")
    return [f"{key}: R {max(measured[key]):.3f} < floor {ref:.3f}"
            for key, ref in floor.items() if max(measured[key]) < ref]
