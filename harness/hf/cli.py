"""`python -m harness.hf`: an HF config.json -> the Hydra overrides that make `encoding=rope` its RoPE (one
layer type's, with --layer-type, where its rope parameters are per layer type), or a run dir -> HF's rope fragment
(--from-run). Bad input is one `harness.hf: error:` line naming the file, exit 2.

The overrides are one line on stdout, quoted for a POSIX shell (shlex.join): pasted after `python -m harness` it
runs. Notes and the head_dim hint go to stderr as `#` lines, so stdout is the overrides alone."""
import shlex
from pathlib import Path

from harness.config.overrides import hydra_value
from harness.hf.plain import LayerTypeError, check_values, read_config, show
from harness.hf.rope import rope_from_hf, rope_to_hf


def overrides(params: dict) -> list:
    """Hydra overrides that select these rope parameters (`python -m harness ...`), one argv item each (unquoted:
    the CLI quotes them for the shell); head_dim is the model's. A dict or list is forced with ++ (rope.yaml's
    `scaling: {}` has no keys to override)."""
    out = ["encoding=rope"]
    for k, v in params.items():
        if k != "head_dim" and v != {}:  # rope.yaml's scaling is {} already
            out.append(f"++encoding.{k}={hydra_value(v)}" if isinstance(v, (dict, list)) else f"encoding.{k}={v}")
    return out


def from_run(run_dir) -> dict:
    """The HF fragment of a run's rope encoding (its resolved .hydra/config.yaml); head_dim from the model.
    Bad input raises ValueError in one line naming the file and the key."""
    import yaml
    f = Path(run_dir) / ".hydra" / "config.yaml"
    if not f.is_file():
        raise ValueError(f"{run_dir}: no .hydra/config.yaml (a run dir of python -m harness)")
    try:
        cfg = yaml.safe_load(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        mark = getattr(e, "problem_mark", None)
        what = getattr(e, "problem", None) or getattr(e, "reason", None) or getattr(e, "strerror", None) or e
        raise ValueError(f"{f}: not a readable YAML file ({what}"
                         f"{f' at line {mark.line + 1}' if mark else ''})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{f}: a run config holds a mapping, got {show(cfg)}")
    _same_run(Path(run_dir), f, cfg)
    enc, model = cfg.get("encoding"), cfg.get("model")
    for key, v in (("encoding", enc), ("model", model)):
        if not isinstance(v, dict):
            raise ValueError(f"{f}: {key} must be a mapping, got {show(v)}")
    enc = dict(enc)
    if enc.pop("name", None) != "rope":
        raise ValueError(f"{run_dir}: its encoding is not rope; HF configs describe RoPE")
    try:
        check_values(model, {"head_dim": "int>0", "d_model": "int>0", "n_heads": "int>0"}, "model.")
        if model.get("head_dim") is None and None in (model.get("d_model"), model.get("n_heads")):
            raise ValueError("model needs head_dim, or d_model and n_heads")
        head_dim = model.get("head_dim") or model["d_model"] // model["n_heads"]
        return rope_to_hf({**enc, "head_dim": head_dim})
    except ValueError as e:
        raise ValueError(f"{f}: {e}") from None


def _same_run(run_dir, f, cfg):
    """Refuse a .hydra/config.yaml that is not the config the run's rows came from: Hydra rewrites it when a later
    command reuses the run dir (status.json keeps the finished run's config hash)."""
    from harness import results
    from harness.config import from_dict
    status = results.read_status(run_dir) or {}
    recorded = status.get("config_hash")
    if not recorded:
        return
    try:
        now = results.config_hash(from_dict(cfg))
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(f"{f}: not a run config of this harness ({' '.join(str(e).split())[:160]})") from None
    if now != recorded:
        raise ValueError(f"{f} is not the config of the run in {run_dir} (config hash {now}, the run's {recorded}): "
                         f"a later command rewrote it; rerun the run, or read its checkpoint's config")


def _parser(**kw):
    """argparse whose usage errors are one line (`prog: error: ...`, exit 2) like every other refusal here."""
    import argparse
    import sys

    class OneLine(argparse.ArgumentParser):
        def error(self, message):
            print(f"{self.prog.removeprefix('python -m ')}: error: {message}; see --help", file=sys.stderr)
            raise SystemExit(2)
    return OneLine(**kw)


def main(argv=None):
    import json
    import sys

    ap = _parser(prog="python -m harness.hf",
                 description="HF config.json -> Hydra overrides of encoding=rope, or a run -> HF")
    ap.add_argument("config", nargs="?", help="an HF config.json")
    ap.add_argument("--layer-type", help="with per-layer-type rope_parameters (Gemma 3 / 4: full_attention or "
                    "sliding_attention): which layers' RoPE")
    ap.add_argument("--from-run", metavar="RUN_DIR", help="print the HF rope fragment of this run's encoding")
    a = ap.parse_args(argv)
    try:
        if (a.config is None) == (a.from_run is None):
            raise ValueError("give an HF config.json or --from-run RUN_DIR (one of them)")
        if a.from_run:
            if a.layer_type is not None:
                raise ValueError("--layer-type reads an HF config.json; a run has one rope encoding")
            print(json.dumps(from_run(a.from_run), indent=1))
            return 0
        cfg, notes = read_config(a.config), []
        try:
            params = rope_from_hf(cfg, layer_type=a.layer_type, notes=notes)
        except LayerTypeError as e:
            raise ValueError(f"{a.config}: {_layer_type_message(e, a.layer_type)}") from None
        except ValueError as e:
            raise ValueError(f"{a.config}: {e}") from None
    except ValueError as e:
        print(f"harness.hf: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    print(shlex.join(overrides(params)))  # one line a POSIX shell reads back as these argv items: paste it
    for note in notes:
        print(f"# {note}", file=sys.stderr)
    print(f"# head_dim {params['head_dim']}: model.head_dim={params['head_dim']}, or model.d_model / model.n_heads that "
          f"give it", file=sys.stderr)
    return 0


def _layer_type_message(e, given):
    """rope_from_hf's layer-type refusal in the CLI's words: the flag, and the layer types it takes."""
    if not e.choices:  # a flat config given --layer-type: its own words (the fault battery's case names them)
        return str(e)
    if given is None:
        return (f"this config's rope parameters are per layer type: give --layer-type, one of {e.choices} (each "
                f"layer type's RoPE is one encoding=rope)")
    return f"--layer-type {given}: {e}"

