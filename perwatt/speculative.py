"""Speculative decoding: when drafting pays, when it does not, and what it does to comparisons.

A small draft model proposes ``gamma`` tokens; the target model checks them all in one pass and
keeps the longest prefix it agrees with, plus one token of its own. With each drafted token
accepted independently with probability ``alpha`` (Leviathan et al., 2023):

* expected tokens per target pass: (1 − α^(γ+1)) / (1 − α);
* wall-time speed-up when a draft token costs ``c`` target passes: that ÷ (γc + 1).

That closed form assumes verifying γ+1 tokens costs the same as generating one, which holds
only while decode is memory-bound. :func:`batch_speedup` drops the assumption: it prices the
verification pass with the roofline model of :mod:`perwatt.roofline`, where a large batch makes
decode compute-bound and verification work stops being free.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perwatt import checks, roofline, serving


def _check_alpha(alpha, name: str = "alpha") -> np.ndarray:
    """An acceptance rate in [0, 1)."""
    return checks.array(name, alpha, minimum=0.0, exclusive_maximum=1.0)


def _check_gamma(gamma, name: str = "gamma") -> np.ndarray:
    """A draft length: a whole number in 0..1024."""
    return checks.array(name, gamma, minimum=0, maximum=checks.MAX_GAMMA, whole=True)


def _check_cost(c) -> np.ndarray:
    """A draft token's cost in target passes, ≥ 0."""
    return checks.array("c", c, minimum=0.0)


ALPHA, GAMMA, COST = (checks.rule(checks.scalar, minimum=0.0, exclusive_maximum=1.0),
                      checks.rule(checks.integer, minimum=0, maximum=checks.MAX_GAMMA),
                      checks.rule(checks.scalar, minimum=0.0))


def expected_tokens(alpha, gamma):
    """Expected tokens produced per target pass (accepted drafts plus the target's own token)."""
    a, g = _check_alpha(alpha), _check_gamma(gamma)
    checks.broadcastable(alpha=a, gamma=g)
    return (1 - a ** (g + 1)) / (1 - a)


def speedup(alpha, gamma, c):
    """Leviathan et al.'s wall-time improvement factor: expected tokens ÷ (γc + 1)."""
    g, cost = _check_gamma(gamma), _check_cost(c)
    checks.broadcastable(alpha=_check_alpha(alpha), gamma=g, c=cost)
    return expected_tokens(alpha, gamma) / (g * cost + 1)


#: A generous acceptance rate and draft length for a general-purpose draft model: the book's
#: upper case for what speculation could add to one side's per-user speed.
GENEROUS_ALPHA = 0.9
GENEROUS_GAMMA = 8


def unexplained_factor(per_user_ratio, alpha=GENEROUS_ALPHA, gamma=GENEROUS_GAMMA):
    """The part of a per-user advantage that speculation at ``alpha`` and ``gamma`` leaves
    unexplained: the advantage divided by the expected tokens per target pass."""
    ratio, tokens = checks.positive("per_user_ratio", per_user_ratio), expected_tokens(alpha, gamma)
    checks.broadcastable(per_user_ratio=ratio, **{"alpha and gamma": np.asarray(tokens)})
    return ratio / tokens


def best_gamma(alpha, c, max_gamma: int = 16):
    """The draft length in 0..``max_gamma`` with the largest closed-form speed-up (0 = do not speculate)."""
    a, cost = _check_alpha(alpha), _check_cost(c)
    checks.broadcastable(alpha=a, c=cost)
    a, cost = a[..., None], cost[..., None]
    max_gamma = checks.integer("max_gamma", max_gamma, minimum=0, maximum=checks.MAX_GAMMA)
    gammas = np.arange(max_gamma + 1, dtype=float)
    return gammas[np.argmax(speedup(a, gammas, cost), axis=-1)]


def simulate(alpha: float, gamma: int, rounds: int, seed: int = 0) -> dict:
    """Monte Carlo of drafting and verification: ``rounds`` target passes.

    Each pass drafts ``gamma`` tokens; they are accepted one by one with probability ``alpha``
    until the first rejection, and the target adds one token of its own. Returns the mean tokens
    per pass and its standard error. Deterministic for a given seed.
    """
    alpha, gamma = ALPHA("alpha", alpha), GAMMA("gamma", gamma)
    rounds = checks.integer("rounds", rounds, minimum=2, maximum=checks.MAX_DRAWS)
    seed = checks.integer("seed", seed, minimum=0)
    if rounds * gamma > checks.MAX_DRAWS:
        raise ValueError(f"rounds × gamma must be at most {checks.MAX_DRAWS:,} draws, got {rounds * gamma:,}")
    rng = np.random.default_rng(seed)
    accepted_each = rng.random((rounds, int(gamma))) < alpha
    # Tokens kept per pass: the run of acceptances before the first rejection, plus one.
    run = np.cumprod(accepted_each, axis=1).sum(axis=1) if gamma else np.zeros(rounds)
    tokens = run + 1
    return {"mean": float(tokens.mean()), "stderr": float(tokens.std(ddof=1) / np.sqrt(rounds)), "rounds": rounds}


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, batch=checks.BATCH, context=checks.CONTEXT,
                  assumptions=roofline.ASSUMED)
def batch_speedup(model: str, accelerator: str, alpha, gamma, c, batch, context: float = 8704,
                  assumptions: roofline.Assumptions = roofline.DEFAULTS) -> dict:
    """Speed-up per user and energy per accepted token at a batch size, from the roofline model.

    A round drafts ``gamma`` tokens (each costing ``c`` plain target steps) and verifies
    ``gamma + 1`` tokens per sequence in one target pass, producing ``expected_tokens`` tokens
    per sequence. Without speculation a step produces one token per sequence.
    Returns arrays: the speed-up, plain and speculative seconds per token, and joules per
    accepted output token with and without speculation at the chip's rated power.
    """
    spec = roofline.model_spec(model)
    device = roofline.chip(accelerator)
    batch = np.asarray(batch, dtype=float)
    g = _check_gamma(gamma)
    cost = _check_cost(c)
    checks.broadcastable(alpha=_check_alpha(alpha), gamma=g, c=cost, batch=batch, context=np.asarray(context))
    chips = roofline.chips_needed(spec, device, batch, context, assumptions)
    plain = roofline.decode_time(spec, device, batch, context, chips, assumptions)
    verify = roofline.decode_time(spec, device, batch, context, chips, assumptions, tokens_per_sequence=g + 1)
    round_time = g * cost * plain + verify
    tokens = expected_tokens(alpha, g)
    per_token = round_time / tokens
    energy_per_second = device.power_w * chips
    return {
        "speedup": plain / per_token,
        "plain_s_per_token": plain,
        "speculative_s_per_token": per_token,
        "plain_j_per_token": energy_per_second * plain / batch,
        "speculative_j_per_token": energy_per_second * per_token / batch,
        "chips": chips,
    }


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, alpha=ALPHA, gamma=GAMMA, c=COST,
                  max_batch=checks.rule(checks.integer, maximum=65_536))
def crossover_batch(model: str, accelerator: str, alpha: float, gamma: int, c: float,
                    max_batch: int = 4096, **kwargs) -> float:
    """The batch size at which speculation stops paying as batches grow: the smallest batch,
    above the one where the speed-up peaks, with a speed-up of 1 or less. NaN if speculation
    still pays at ``max_batch``."""
    batches = np.arange(1, max_batch + 1, dtype=float)
    gain = batch_speedup(model, accelerator, alpha, gamma, c, batches, **kwargs)["speedup"]
    peak = int(np.argmax(gain))
    losing = np.flatnonzero(gain[peak:] <= 1.0)
    return float(batches[peak + losing[0]]) if len(losing) else float("nan")


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, alpha=ALPHA, gamma=GAMMA, c=COST,
                  context=checks.rule(checks.scalar, minimum=0.0, maximum=checks.MAX_TOKENS))
def batch_frame(model: str, accelerator: str, alpha: float, gamma: int, c: float, context: float = 8704,
                batches=serving.BATCHES) -> pd.DataFrame:
    """Speed-up and energy per accepted token across batch sizes, with the crossover batch."""
    batches = serving.batch_list(batches)
    result = batch_speedup(model, accelerator, alpha, gamma, c, batches, context)
    frame = pd.DataFrame({"batch": np.asarray(batches, dtype=int), **{k: np.asarray(v) for k, v in result.items()}})
    frame["energy_ratio"] = frame["speculative_j_per_token"] / frame["plain_j_per_token"]
    frame["crossover_batch"] = crossover_batch(model, accelerator, alpha, gamma, c, context=context)
    return frame


#: The acceptance rates and draft lengths the book's speed-up surface spans.
SURFACE_ALPHAS = tuple(np.round(np.arange(0.5, 0.951, 0.05), 2))
SURFACE_GAMMAS = tuple(range(1, 11))


def speedup_surface(c: float, alphas=SURFACE_ALPHAS, gammas=SURFACE_GAMMAS) -> pd.DataFrame:
    """The closed-form speed-up over a grid of acceptance rates and draft lengths at draft cost
    ``c``, with ``is_best`` marking the best draft length (within ``gammas``) for each rate."""
    checks.scalar("c", c, minimum=0.0)
    alphas, gammas = _check_alpha(alphas, "alphas"), _check_gamma(gammas, "gammas")
    if alphas.ndim != 1 or gammas.ndim != 1 or not 0 < len(alphas) * len(gammas) <= 1_000_000:
        raise ValueError(f"alphas and gammas must be non-empty lists of at most 1,000,000 pairs, got {alphas!r} "
                         f"and {gammas!r}")
    a, g = np.meshgrid(alphas, gammas, indexing="ij")
    frame = pd.DataFrame({"alpha": a.ravel(), "gamma": g.ravel().astype(int)})
    frame["speedup"] = speedup(frame["alpha"].to_numpy(), frame["gamma"].to_numpy(), c)
    frame["expected_tokens"] = expected_tokens(frame["alpha"].to_numpy(), frame["gamma"].to_numpy())
    best = frame.groupby("alpha")["speedup"].transform("max")
    frame["is_best"] = frame["speedup"] == best
    return frame
