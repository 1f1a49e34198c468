"""RoPE's geometry relative to a training length, and a small model placed in a large model's geometry.

Rotary pair i of a head of d rotary dimensions turns with θ_i = base^(-2i/d), wavelength λ_i = 2π base^(2i/d).
Liu et al. 2023 ("Scaling Laws of RoPE-based Extrapolation", arXiv 2310.05209, eq. 6 and their Llama 2 figure)
call the pairs whose period fits inside the training length T the ones the model has seen every phase of; the
critical dimension is d_extra = 2 ceil((d/2) log_base(T / 2π)) (Llama 2: base 1e4, d 128, T 4096 -> 92). With the
fraction c = log_base(T / 2π), pair i completes T / λ_i = base^(c - 2i/d) turns inside the context: c is where a
pair turns exactly once, so c is the share of the head that has turned fully.

A proxy is a laptop model (its own head_dim and train length t) placed at the target's c: base_p = (t / 2π)^(1/c).
The two then agree on which share of the head has turned (the critical dimension) but not on how many turns the
fastest pairs make (t / 2π against T / 2π), so quantities counted in turns inside the original context (YaRN's
beta_fast / beta_slow, Llama 3's low / high_freq_factor, Peng et al. 2023 arXiv 2309.00071 §3.2) are carried
through the head fraction they mark: a threshold of r turns at the target marks fraction x = c - log_base(r), and
the proxy's pair at that fraction turns base_p^(c - x) = r^(ln base_p / ln base) times. One turn stays one turn
(beta_slow 1 -> 1), so the proxy interpolates exactly the dimensions the target interpolates."""
import math

# Knobs counted in turns inside the original context (HF's modeling_rope_utils: YaRN's find_correction_dim,
# Llama 3's wavelength bounds original_max_position_embeddings / {low,high}_freq_factor)
TURN_KNOBS = ("beta_fast", "beta_slow", "low_freq_factor", "high_freq_factor")


def _check(base, train_len):
    if not (math.isfinite(base) and base > 1):
        raise ValueError(f"RoPE base must be a finite number > 1, got {base}")
    if not (train_len > 2 * math.pi):
        raise ValueError(f"train length must exceed 2π (one turn of the fastest pair), got {train_len}")


def critical_fraction(base: float, train_len: float) -> float:
    """c = log_base(T / 2π): the share of the head (by pair index) whose pairs turn at least once inside T.
    Above 1 when even the slowest pair turns (no pair is left unseen)."""
    _check(base, train_len)
    return math.log(train_len / (2 * math.pi)) / math.log(base)


def critical_dim(head_dim: int, base: float, train_len: float) -> int:
    """Liu et al. 2023's d_extra = 2 ceil((d/2) log_base(T / 2π)), capped at d: the dimensions whose pairs have
    turned a full period inside the training length (head_dim: the rotary dimensions)."""
    return min(head_dim, 2 * math.ceil(head_dim / 2 * critical_fraction(base, train_len)))


def matched_base(train_len: float, fraction: float) -> float:
    """The base that puts critical_fraction(base, train_len) at `fraction`: (T / 2π)^(1 / fraction)."""
    if not (0 < fraction < math.inf):
        raise ValueError(f"critical fraction must be > 0, got {fraction}")
    _check(2.0, train_len)
    return (train_len / (2 * math.pi)) ** (1 / fraction)


def carried_turns(turns: float, base_from: float, base_to: float) -> float:
    """A count of turns inside the original context under base_from, carried to base_to at the same head
    fraction: turns^(ln base_to / ln base_from) (one turn stays one)."""
    _check(base_from, 7.0)
    _check(base_to, 7.0)
    if not turns > 0:
        raise ValueError(f"a number of turns must be > 0, got {turns}")
    return turns ** (math.log(base_to) / math.log(base_from))


def proxy(target_base: float, target_len: float, train_len: float, knobs: dict) -> dict:
    """The proxy's RoPE for a target (its base and trained context) at the laptop's train length: `base` and
    every TURN_KNOBS entry of `knobs` (the target's values, HF's units) carried to the proxy's base. The
    target's head_dim does not enter: c is a fraction of the head whatever its width."""
    base = matched_base(train_len, critical_fraction(target_base, target_len))
    return dict(base=base, **{k: carried_turns(v, target_base, base) for k, v in knobs.items() if k in TURN_KNOBS})
