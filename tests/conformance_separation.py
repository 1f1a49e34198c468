"""How far the planted bugs sit above the tolerance, and how close correct code comes to it (results/conformance/
TOLERANCES.md, "No false alarms"): `.venv/bin/python tests/conformance_separation.py`, a few minutes."""
import math
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from conformance_kit import in_kernel_exp, planted_table, ulps_off, with_inv, yarn_reversed  # noqa: E402

from harness.conformance import bugs, run  # noqa: E402


def line(label, rows):
    f = [r["ratio"] for r in rows if r["result"] == "FAIL"]
    p = [r["ratio"] for r in rows if r["result"] == "pass"]
    print(f"| {label} | {len(rows)} | {len(f)} FAIL, {len(p)} pass | FAIL min {min(f) if f else math.nan:.3g}, "
          f"pass max {max(p) if p else math.nan:.3g} |", flush=True)


def main():
    exponent = (lambda r, i, a: (1.0 / r["rope_theta"] ** (torch.arange(i.numel()).float() / (2 * i.numel()))
                                 / r.get("factor", 1.0), a))
    cases = [("inv_freq up to 3 ulps off", ulps_off(3), None), ("inv_freq as exp(-(2j/R) ln b) in fp32",
                                                                 with_inv(in_kernel_exp), None),
             ("inv_freq up to 8 ulps off", ulps_off(8), None)]
    cases += [(fault, planted_table(fault), ["yarn", "default", "llama3"])
              for fault in (bugs.ATTENTION, bugs.BF16_INV, bugs.FP16_POS, bugs.BF16_POS, bugs.OFF_BY_ONE)]
    cases += [(bugs.YARN_RAMP, yarn_reversed, ["yarn"]),
              (bugs.ATTENTION_TWICE, with_inv(lambda r, i, a: (i, a * a)), ["yarn", "longrope"]),
              (bugs.INTERP_REVERSED, with_inv(lambda r, i, a: (i * r["factor"] ** 2, a)), ["linear"]),
              (bugs.INTERP_MISSING, with_inv(lambda r, i, a: (i * r["factor"], a)), ["linear"]),
              (bugs.EXPONENT, with_inv(exponent), ["default", "linear"])]
    for label, fn, types in cases:
        line(label, run.run(fn, "positions", "half", "fp32", rope_types=types)[0])


if __name__ == "__main__":
    main()
