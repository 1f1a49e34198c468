"""Planted report rows shared by the report's tests (not a test module: tests/test_layout.py): run dirs with known
differences and seed noise, and a reader of the report's markdown tables."""
from harness import results

LENS = (64, 128, 512)  # 1x, 2x and 8x the train length
SEED_EFFECT = (0.30, -0.20, 0.10, -0.15)  # shared by every encoding of one seed (same batches, same windows)
OWN = (0.010, -0.020, 0.015, -0.005)  # each encoding's own noise per seed
BASE = dict(sweep="t", model="tiny", d_model=32, n_layers=1, n_heads=2, head_dim=16, task="lm", train_len=64,
            dtype="float32", device="cpu", torch="x", harness_version="0", git_sha="abc", time="now")


def run_rows(encoding, seed, ppl, *, model="tiny", d_model=32, steps=100, extra=()):
    """One run's rows: ppl (nonoverlapping) at LENS from ppl(L) plus the run's train_steps row."""
    base = {**BASE, "run_id": f"model={model}/encoding={encoding},seed={seed}", "encoding": encoding, "seed": seed,
            "model": model, "d_model": d_model, "params": {}}
    measured = [dict(metric="ppl", eval_len=L, protocol="nonoverlapping", value=ppl(L), unit="ppl") for L in LENS]
    measured += [dict(metric="train_steps", eval_len=None, protocol="train", value=float(steps), unit="steps"),
                 *extra]
    return results.complete(measured, base, steps)


def planted(root, seeds=range(4), budgets=(("tiny", 32, 100),), extra=lambda enc, s: (),
            encodings=("rope", "alibi", "twin")):
    """rope: 6 + seed effect; alibi: rope + 1 (the planted difference); twin: rope + a zero-mean wiggle
    (the planted tie). Returns the sweep dir."""
    offset = {"rope": lambda s: 0.0, "alibi": lambda s: 1.0 + OWN[s], "twin": lambda s: (0.001, -0.001, 0.002,
                                                                                           -0.002)[s]}
    for model, d_model, steps in budgets:
        for enc in encodings:
            off = offset[enc]
            for s in seeds:
                df = run_rows(enc, s, lambda L: 6 + L / 512 + SEED_EFFECT[s] + off(s), model=model, d_model=d_model,
                              steps=steps, extra=extra(enc, s))
                results.write_rows(root / f"model={model}" / f"encoding={enc},seed={s}", df)
    return root


def table_rows(md, heading):
    """{row label: [cells]} of the first table after the line starting with `heading`, and the text from
    the heading to the table's end."""
    lines = md.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(heading))
    j = next(k for k in range(i, len(lines)) if lines[k].startswith("|")) + 2  # past the header and |---|
    out = {}
    while j < len(lines) and lines[j].startswith("|"):
        cells = [c.strip() for c in lines[j].strip("|").split("|")]
        out[cells[0]] = cells[1:]
        j += 1
    return out, "\n".join(lines[i:j])


def many_encodings(root, names, seeds=range(2)):
    """Runs of `names` (registered encodings, several families) with a row of every kind the report draws."""
    for i, enc in enumerate(names):
        for s in seeds:
            def extra(enc=enc, s=s, i=i):
                at = lambda L: 6 + i / 10 + L / 512 + SEED_EFFECT[s]  # noqa: E731
                out = [dict(metric="nll_by_pos", eval_len=512, protocol="nonoverlapping", unit="nats",
                            value=1.5 + lo / 512 + i / 50, extra_params=dict(pos_lo=lo, pos_hi=lo + 64))
                       for lo in range(0, 512, 64)]
                out += [dict(metric="train_loss", eval_len=None, protocol="train", value=3 - k / 50 + i / 20,
                             unit="nats", step=k) for k in range(0, 100, 20)]
                out += [dict(metric=m, eval_len=64, protocol="train", value=v, unit=u) for m, v, u in
                        (("train_tokens_per_s", 1e4 + 100 * i + 50 * s, "tokens/s"),
                         ("peak_mem_bytes", 2e7 + 1e5 * i, "bytes"))]
                out += [dict(metric="byte_acc", eval_len=L, protocol="nonoverlapping", value=0.5, unit="frac")
                        for L in LENS]
                out += [dict(metric="effective_len_relative", eval_len=None, protocol="byte_acc:nonoverlapping",
                             value=512.0 if i % 2 else 128.0 + 64 * s, unit="tokens")]
                out += [dict(metric="kl_fp32", eval_len=L, protocol="cast", dtype="bf16", value=1e-5 * (i + 1) * L,
                             unit="nats", extra_params=dict(seq_len=64)) for L in (16, 32, 64)]
                if enc == "rope":
                    out += [dict(metric="ppl", eval_len=L, protocol="nonoverlapping", value=at(L) + j, unit="ppl",
                                 extra_params=dict(extension=x, factor=L / 64)) for L in LENS
                            for j, x in enumerate(("linear", "ntk"))]
                return out
            df = run_rows(enc, s, lambda L, i=i, s=s: 6 + i / 10 + L / 512 + SEED_EFFECT[s], extra=extra())
            results.write_rows(root / f"encoding={enc},seed={s}", df)
    return root
