"""Speculative decoding: how many tokens a pass yields, what the draft costs, when drafting pays.

A drafter proposes ``gamma`` tokens; the target model checks them all in one pass and keeps the
longest prefix it agrees with, plus one token of its own.

**Acceptance.** Write ``s_i`` for the probability that the first ``i`` drafted tokens are all
accepted (a per-position profile, non-increasing). A pass yields ``1 + s_1 + … + s_γ`` tokens on
average. Measured tokens per pass ``a(γ)`` at γ = 1, 2, … give the profile, ``s_γ = a(γ) − a(γ − 1)``,
provided the first drafts are accepted as often whatever number of drafts follow them (true of
drafts made one after another, as autoregressive MTP layers and draft models make them).
Leviathan et al. (2023) take each drafted token to be accepted independently at one rate ``α``:
``s_i = α^i``, the closed form (1 − α^(γ+1)) / (1 − α) and, with a draft token costing ``c``
target passes, the speed-up that ÷ (γc + 1). **Tree drafting**, as modelled here (an
assumption): ``k`` chains of γ tokens are verified in one pass of k·γ + 1 tokens per sequence
and the longest accepted one is kept; if chains fail independently, the first ``i`` positions
survive in at least one with probability 1 − (1 − s_i)^k.

**Pricing** (:func:`round_time`): γ draft steps and one verification pass, each priced by the
serving model (:mod:`perwatt.parallel`). ``"mtp"``: each drafted token costs one more layer of the
target, as DeepSeek's multi-token-prediction module is one layer (how :func:`perwatt.serving.serve`
prices it). A draft model named by its row in data/model_specs.csv: a decode pass of that model
per drafted token, tensor parallel on the target's chips. ``"cost"``: the closed form's fixed
price, ``c`` plain target passes per drafted token.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perwatt import checks, parallel, roofline, serving, specs


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
OPTIONAL_COST = checks.rule(checks.optional, COST)
#: Chains a tree draft verifies at once, at most (the verification pass is k·γ + 1 tokens long).
MAX_BRANCHES = 64
BRANCHES = checks.rule(checks.integer, minimum=1, maximum=MAX_BRANCHES)
CROSSOVER_MAX_BATCH = 4096  #: the largest batch crossover_batch looks at by default, and batch_frame's sweep


def expected_tokens(alpha, gamma, branches: int = 1):
    """Expected tokens produced per target pass (accepted drafts plus the target's own token)
    when each drafted token is accepted independently at rate ``alpha``: the closed form
    (1 − α^(γ+1)) / (1 − α) for one chain, 1 + Σᵢ (1 − (1 − αⁱ)^k) for the best of
    ``branches`` = k independent chains (the module's tree model)."""
    a, g = _check_alpha(alpha), _check_gamma(gamma)
    k = checks.integer("branches", branches, minimum=1, maximum=MAX_BRANCHES)
    checks.broadcastable(alpha=a, gamma=g)
    if k == 1:
        return (1 - a ** (g + 1)) / (1 - a)
    if g.size == 0:  # no draft lengths, no answers (np.max of nothing has no value)
        return np.broadcast_to(1.0, np.broadcast_shapes(a.shape, g.shape)).copy()
    positions = np.arange(1, int(np.max(g)) + 1, dtype=float)
    survive = 1 - (1 - a[..., None] ** positions) ** k
    return 1 + np.where(positions <= g[..., None], survive, 0.0).sum(axis=-1)


def speedup(alpha, gamma, c):
    """Leviathan et al.'s wall-time improvement factor: expected tokens ÷ (γc + 1)."""
    g, cost = _check_gamma(gamma), _check_cost(c)
    checks.broadcastable(alpha=_check_alpha(alpha), gamma=g, c=cost)
    return expected_tokens(alpha, gamma) / (g * cost + 1)


# --- Per-position acceptance ---------------------------------------------------------------

def _check_profile(name: str, profile) -> np.ndarray:
    """A per-position profile: 1 to 1,024 probabilities, each no larger than the one before."""
    s = checks.array(name, profile, minimum=0.0, maximum=1.0)
    if s.ndim != 1 or not 1 <= len(s) <= checks.MAX_GAMMA:
        raise ValueError(f"{name} must be a list of 1 to {checks.MAX_GAMMA} probabilities, got {profile!r}")
    rises = np.flatnonzero(np.diff(s) > 0)
    if len(rises):
        i = int(rises[0]) + 1
        raise ValueError(f"{name} must not rise with position (the first i drafts cannot all be accepted more "
                         f"often than the first i − 1), but position {i + 1} has {s[i]:g} after {s[i - 1]:g}")
    return s


def prefix_acceptance(tokens_per_pass) -> np.ndarray:
    """P(the first i drafted tokens are all accepted), i = 1..n, from measured tokens per pass
    with 1..n drafts: a(i) − a(i − 1), with a(0) = 1 (see the module docstring for when this
    holds). Refuses measurements no profile can produce (a rise larger than the one before)."""
    a = checks.array("tokens_per_pass", tokens_per_pass, minimum=1.0, maximum=checks.MAX_GAMMA + 1)
    if a.ndim != 1 or not len(a):
        raise ValueError(f"tokens_per_pass must be a list of tokens per pass at 1, 2, … drafts, "
                         f"got {tokens_per_pass!r}")
    return _check_profile("tokens_per_pass (as rises per draft)", np.diff(np.concatenate([[1.0], a])))


def position_rates(profile) -> np.ndarray:
    """The acceptance rate at each position given that every earlier draft was accepted:
    s_i ÷ s_(i−1) (NaN after a position no pass survives)."""
    s = _check_profile("profile", profile)
    before = np.concatenate([[1.0], s[:-1]])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(before > 0, s / before, np.nan)


def independent_profile(alpha: float, positions: int) -> np.ndarray:
    """The profile of independent acceptance at rate ``alpha``: αⁱ for i = 1..``positions``."""
    a = checks.scalar("alpha", alpha, minimum=0.0, exclusive_maximum=1.0)
    n = checks.integer("positions", positions, minimum=1, maximum=checks.MAX_GAMMA)
    return a ** np.arange(1, n + 1, dtype=float)


def tree_profile(profile, branches: int) -> np.ndarray:
    """The profile of the best of ``branches`` chains that each follow ``profile`` and fail
    independently: 1 − (1 − s_i)^k (an assumption: chains drafted by one model from one context
    may fail together more often, which would make this an overstatement)."""
    s = _check_profile("profile", profile)
    k = checks.integer("branches", branches, minimum=1, maximum=MAX_BRANCHES)
    return 1 - (1 - s) ** k


def profile_tokens(profile, drafts):
    """Expected tokens per target pass with ``drafts`` drafted tokens (0 up to the profile's
    length; arrays broadcast): 1 + s_1 + … + s_drafts."""
    s = _check_profile("profile", profile)
    d = checks.array("drafts", drafts, minimum=0, maximum=checks.MAX_GAMMA, whole=True)
    if (d > len(s)).any():
        raise ValueError(f"drafts must be at most the profile's length, {len(s)}, got {float(d.max()):g}")
    totals = 1 + np.concatenate([[0.0], np.cumsum(s)])
    return totals[d.astype(int)]


def fitted_alpha(tokens_one_draft: float) -> float:
    """The independent acceptance rate that reproduces tokens per pass measured with one draft:
    with one draft the closed form is 1 + α."""
    tokens = checks.scalar("tokens_one_draft", tokens_one_draft, minimum=1.0, exclusive_maximum=2.0)
    return tokens - 1.0


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


# --- Pricing a round -------------------------------------------------------------------------

MTP, FIXED_COST = "mtp", "cost"


def drafters() -> list[str]:
    """The drafters :func:`round_time` prices: ``"mtp"``, ``"cost"``, and every model of
    data/model_specs.csv as a separate draft model."""
    return [MTP, FIXED_COST, *specs.known_models()]


def _check_drafter(drafter, c, branches) -> tuple[str, float | None, int]:
    drafter = checks.choice("drafter", drafter, drafters())
    c = OPTIONAL_COST("c", c)
    branches = BRANCHES("branches", branches)
    if (drafter == FIXED_COST) != (c is not None):
        raise ValueError(f"c is the fixed cost of drafter {FIXED_COST!r} and only of it: give c with drafter "
                         f"{FIXED_COST!r}, and no c with drafter {drafter!r}")
    if branches > 1 and drafter in (MTP, FIXED_COST):
        raise ValueError(f"branches: tree drafting is modelled with a separate draft model only, not drafter "
                         f"{drafter!r}")
    return drafter, c, branches


@checks.validated(spec=roofline.SPEC, device=roofline.DEVICE, batch=checks.BATCH, context=checks.CONTEXT,
                  drafts=serving.DRAFTS, chips=checks.CHIPS, dp_attention=checks.FLAG, drafter=checks.TEXT,
                  assumptions=roofline.ASSUMED)
def round_time(spec: roofline.ModelSpec, device: roofline.Chip, batch, context, drafts, chips=1, ep=1,
               dp_attention=False, drafter: str = MTP, c: float | None = None, branches: int = 1,
               assumptions: roofline.Assumptions = roofline.DEFAULTS) -> dict:
    """Seconds of one speculative round on an instance (arrays broadcast), by part: ``plain``
    (one pass without speculation), ``draft`` (the ``drafts`` draft steps), ``verify`` (the target
    pass over drafts + 1 tokens per sequence, or k·drafts + 1 for ``branches`` = k chains) and
    ``round`` (draft + verify). ``drafter`` is ``"mtp"``, ``"cost"`` (with ``c``) or a draft
    model's name (see the module docstring). A draft model's memory is not checked: it is taken
    to fit beside the target."""
    drafter, c, branches = _check_drafter(drafter, c, branches)
    d = np.asarray(drafts, dtype=float)

    def target(tokens):
        return parallel.pass_time(spec, device, batch, context, chips, ep, dp_attention, tokens, "decode",
                                  assumptions)["total"]

    plain = target(1)
    verify = target(branches * d + 1)
    if drafter == MTP:
        # serve's own price for MTP drafts, so that this module and the serving model agree.
        draft = serving.decode_pass(spec, device, batch, context, chips, ep, dp_attention, d, assumptions) - verify
    elif drafter == FIXED_COST:
        draft = d * c * plain
    else:
        small = roofline.model_spec(drafter)
        draft = d * parallel.pass_time(small, device, batch, context, chips, 1, False, branches, "decode",
                                       assumptions)["total"]
    shape = np.broadcast(plain, verify, draft).shape
    parts = {"plain": plain, "draft": draft, "verify": verify, "round": draft + verify}
    return {k: np.broadcast_to(v, shape).astype(float) for k, v in parts.items()}


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, batch=checks.BATCH, context=checks.CONTEXT,
                  chips=checks.rule(checks.optional, checks.CHIPS), drafter=checks.TEXT,
                  precision=serving.PRECISION, assumptions=roofline.ASSUMED)
def batch_speedup(model: str, accelerator: str, alpha, gamma, batch, context: float = 8704,
                  assumptions: roofline.Assumptions = roofline.DEFAULTS, drafter: str = MTP, c: float | None = None,
                  branches: int = 1, chips=None, precision: str = "as_released") -> dict:
    """Speed-up per user and energy per accepted token at a batch size, from the serving model.

    A round drafts ``gamma`` tokens with ``drafter`` and verifies them in one target pass
    (:func:`round_time`), yielding :func:`expected_tokens` tokens per sequence at independent
    acceptance ``alpha``; a plain pass yields one. The instance has ``chips`` chips, by default
    the fewest that hold the weights and the caches, tensor parallel. Returns arrays: the
    speed-up, plain and speculative seconds per token, joules per accepted output token with and
    without speculation at the chip's rated power, and the chips.
    """
    spec = roofline.model_spec(model).with_precision(precision)
    device = roofline.chip(accelerator)
    a, g = _check_alpha(alpha), _check_gamma(gamma)
    checks.broadcastable(alpha=a, gamma=g, batch=np.asarray(batch), context=np.asarray(context))
    if chips is None:
        chips = roofline.chips_needed(spec, device, batch, context, assumptions)
    parts = round_time(spec, device, batch, context, g, chips, 1, False, drafter, c, branches, assumptions)
    tokens = expected_tokens(a, g, branches)
    plain = parts["plain"]
    per_token = parts["round"] / tokens
    energy_per_second = device.power_w * np.asarray(chips, dtype=float)
    return {
        "speedup": plain / per_token,
        "plain_s_per_token": plain,
        "speculative_s_per_token": per_token,
        "plain_j_per_token": energy_per_second * plain / batch,
        "speculative_j_per_token": energy_per_second * per_token / batch,
        "chips": np.broadcast_to(chips, np.shape(per_token)).astype(float),
    }


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, alpha=ALPHA, gamma=GAMMA, c=OPTIONAL_COST,
                  max_batch=checks.rule(checks.integer, maximum=65_536))
def crossover_batch(model: str, accelerator: str, alpha: float, gamma: int, c: float | None = None,
                    max_batch: int = CROSSOVER_MAX_BATCH, **kwargs) -> float:
    """The batch size at which speculation stops paying as batches grow: the smallest batch,
    above the one where the speed-up peaks, with a speed-up of 1 or less. NaN if speculation
    still pays at ``max_batch``. ``kwargs`` go to :func:`batch_speedup` (drafter, context, …)."""
    batches = np.arange(1, max_batch + 1, dtype=float)
    return _crossover(batches, batch_speedup(model, accelerator, alpha, gamma, batches, c=c, **kwargs)["speedup"])


def _crossover(batches: np.ndarray, gain: np.ndarray) -> float:
    """:func:`crossover_batch` from the speed-up at batches 1, 2, …"""
    peak = int(np.argmax(gain))
    losing = np.flatnonzero(gain[peak:] <= 1.0)
    return float(batches[peak + losing[0]]) if len(losing) else float("nan")


#: Sequences per instance the batch figures sweep.
BATCHES = tuple(2 ** i for i in range(11))


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, alpha=ALPHA, gamma=GAMMA, c=OPTIONAL_COST,
                  context=checks.rule(checks.scalar, minimum=0.0, maximum=checks.MAX_TOKENS), drafter=checks.TEXT,
                  branches=BRANCHES)
def batch_frame(model: str, accelerator: str, alpha: float, gamma: int, c: float | None = None,
                context: float = 8704, batches=BATCHES, drafter: str = MTP, branches: int = 1) -> pd.DataFrame:
    """Speed-up and energy per accepted token across batch sizes, with the crossover batch."""
    batches = serving.batch_list(batches)
    options = {"context": context, "drafter": drafter, "c": c, "branches": branches}
    # The batches crossover_batch prices include the frame's: the model prices batch by batch, so read them there.
    every = np.arange(1, CROSSOVER_MAX_BATCH + 1, dtype=float)
    swept = batch_speedup(model, accelerator, alpha, gamma, every, **options)
    result = ({k: v[batches.astype(int) - 1] for k, v in swept.items()} if batches.max() <= every[-1] else
              batch_speedup(model, accelerator, alpha, gamma, batches, **options))
    return pd.DataFrame({"batch": np.asarray(batches, dtype=int), **{k: np.asarray(v) for k, v in result.items()},
                         "energy_ratio": np.asarray(result["speculative_j_per_token"] / result["plain_j_per_token"]),
                         "crossover_batch": _crossover(every, swept["speedup"])})


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
