"""The per-watt chapter's model: the articles' figures on every power basis and token count.

Every function returns a tidy DataFrame built from the validated data (:mod:`perwatt.catalog`)
and the formulas in :mod:`perwatt.metrics`. Where an input is unknown (an empty cell in
``data/``), the derived value stays empty and a ``note`` column says why; nothing is filled in.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from perwatt import catalog, checks, data, metrics

PublishedBasis = Literal["chip_rated", "jalapeno_measured"]
BaselineBasis = Literal["chip_rated", "all_in_provisioned"]
TokenCount = Literal["all", "output"]
BASIS = checks.rule(checks.choice, catalog.BASIS_LABELS)


@data.cached
def pairs() -> pd.DataFrame:
    """One row per model: Jalapeño's reported TPS/kW beside its baseline's, and the published ratio."""
    table = catalog.results().set_index(["model", "system"])["tps_per_kw"]
    ratios = data.load("reported_ratios")
    published = ratios[ratios["metric"] == "tps_per_kw"].set_index("model")["reported_ratio"]
    rows = [{"model": model, "baseline": baseline,
             "jalapeno_tps_per_kw": table[(model, catalog.CANDIDATE)], "baseline_tps_per_kw": table[(model, baseline)],
             "published_ratio": published[model]}
            for model, baseline in catalog.baselines().items()]
    out = pd.DataFrame(rows)
    out["recomputed_ratio"] = metrics.ratio(out["jalapeno_tps_per_kw"], out["baseline_tps_per_kw"])
    return catalog.label(out)


def implied_chip_throughput() -> pd.DataFrame:
    """Tokens/s per chip that each power basis implies for every reported TPS/kW figure.

    If a figure of *x* tokens/s/kW was computed by dividing by *P* watts, the chip served
    *x · P / 1000* tokens/s. One row per benchmarked model, system and basis; ``tokens_per_s`` is
    empty where that basis has no known power for the system, and ``note`` says why. Where the
    power is an upper bound (``bound == "upper"``), so is the throughput.
    """
    table = catalog.results()[["model", "system", "tps_per_kw"]]
    power = data.load("power")[["system", "basis", "power_w", "bound", "note"]]
    out = table.merge(power, on="system", how="left")
    known = out["power_w"].notna()
    out["tokens_per_s"] = np.nan
    out.loc[known, "tokens_per_s"] = metrics.chip_throughput(out.loc[known, "tps_per_kw"], out.loc[known, "power_w"])
    out["basis_label"] = out["basis"].map(catalog.BASIS_LABELS)
    return catalog.label(out)


@checks.validated(basis=BASIS)
def per_chip_comparison(basis: str = "chip_rated") -> pd.DataFrame:
    """Jalapeño's tokens/s per chip against its own baseline's, both implied on one power ``basis``.

    One row per model, matched to its baseline by name (never by position). ``ratio`` below 1
    means Jalapeño serves fewer tokens per chip; ``more_chips_pct`` is how many more Jalapeño
    chips the same throughput would then take.
    """
    implied = implied_chip_throughput()
    per_chip = implied[implied["basis"] == basis].set_index(["model", "system"])["tokens_per_s"]
    rows = [{"model": model, "baseline": baseline,
             "jalapeno_tokens_per_s": per_chip[(model, catalog.CANDIDATE)],
             "baseline_tokens_per_s": per_chip[(model, baseline)]}
            for model, baseline in catalog.baselines().items()]
    out = pd.DataFrame(rows)
    known = out["jalapeno_tokens_per_s"].notna() & out["baseline_tokens_per_s"].notna()
    out["ratio"] = np.nan
    out.loc[known, "ratio"] = metrics.ratio(out.loc[known, "jalapeno_tokens_per_s"],
                                            out.loc[known, "baseline_tokens_per_s"])
    out["more_chips_pct"] = (1 / out["ratio"] - 1) * 100
    out["note"] = np.where(known, "", f"no {basis} power is published for one side of the pair")
    return out


@checks.validated(published_basis=checks.rule(checks.choice, ("chip_rated", "jalapeno_measured")),
                  jalapeno_power_w=checks.rule(checks.scalar, minimum=checks.MIN_PLAUSIBLE_POWER_W,
                                               maximum=checks.MAX_PLAUSIBLE_POWER_W, unit_hint="watts, not kW"),
                  baseline_basis=checks.rule(checks.choice, ("chip_rated", "all_in_provisioned")))
def basis_comparison(published_basis: PublishedBasis, jalapeno_power_w: float,
                     baseline_basis: BaselineBasis) -> pd.DataFrame:
    """Jalapeño ÷ baseline tokens/s/kW when each side is charged a chosen power.

    ``published_basis`` is the reader's assumption about what the published TPS/kW figures
    divided by: every chip's rating (``"chip_rated"``), or Jalapeño's measured draw with the
    baselines at their ratings (``"jalapeno_measured"``). That fixes the tokens/s each chip
    served. Those tokens are then divided by ``jalapeno_power_w`` for Jalapeño and by the
    baseline's power on ``baseline_basis``. One row per model.
    """
    table = _pair_columns()
    jalapeno_published_w = catalog.power_w(
        catalog.CANDIDATE, "chip_measured" if published_basis == "jalapeno_measured" else "chip_rated")
    baseline_published_w = np.array([catalog.power_w(s, "chip_rated") for s in table["baseline"]], dtype=float)
    baseline_charged_w = np.array([catalog.power_w(s, baseline_basis) for s in table["baseline"]], dtype=float)

    # On the columns as arrays, and one frame at the end: the power-basis figure asks for 140 of these.
    jalapeno_tokens = metrics.chip_throughput(table["jalapeno_tps_per_kw"], jalapeno_published_w)
    baseline_tokens = metrics.chip_throughput(table["baseline_tps_per_kw"], baseline_published_w)
    jalapeno_tps_per_kw = metrics.tps_per_kw_at(jalapeno_tokens, jalapeno_power_w)
    baseline_tps_per_kw = metrics.tps_per_kw_at(baseline_tokens, baseline_charged_w)
    return pd.DataFrame({
        **{c: table[c] for c in ("model", "model_label", "baseline", "baseline_label", "published_ratio")},
        "jalapeno_tokens_per_s": jalapeno_tokens, "baseline_tokens_per_s": baseline_tokens,
        "jalapeno_charged_w": float(jalapeno_power_w), "baseline_charged_w": baseline_charged_w,
        "jalapeno_tps_per_kw": jalapeno_tps_per_kw, "baseline_tps_per_kw": baseline_tps_per_kw,
        "ratio": metrics.ratio(jalapeno_tps_per_kw, baseline_tps_per_kw)})


@data.cached
def _pair_columns() -> dict:
    """:func:`pairs`' columns: text as Series (their dtype kept), numbers as arrays. Read them,
    never write them: every caller shares them."""
    table = pairs()
    return {c: table[c] if table[c].dtype.kind not in "fiu" else table[c].to_numpy() for c in table.columns}


@checks.validated(price_usd_per_kwh=checks.PRICE, pue=checks.PUE, tokens=checks.rule(checks.choice, ("all", "output")),
                  workload_name=checks.rule(checks.optional, checks.TEXT))
def energy_costs(price_usd_per_kwh: float, pue: float, tokens: TokenCount,
                 workload_name: str | None = None) -> pd.DataFrame:
    """Energy per token and its electricity cost, per model and system, from the published TPS/kW.

    ``tokens="all"`` counts input and output tokens, which is the book's reading of the
    published "mixed" figures (the articles do not define the word; InferenceX's throughput
    counts both). ``tokens="output"`` charges the same energy to output tokens alone, at the
    workload's mean drawn lengths (the table's workload by default). The power basis is whatever
    the published figures used; ``pue`` scales it to the facility.
    """
    table = _published_columns()
    joules = metrics.joules_per_token(table["tps_per_kw"])
    if tokens == "output":
        drawn = catalog.lengths(workload_name)
        joules = metrics.per_output_token(joules, drawn.isl_mean, drawn.osl_mean)
    # On the columns as arrays, and one frame at the end: the energy-cost figure asks for 180 of these.
    cost = metrics.energy_cost_per_million_tokens(joules, price_usd_per_kwh, pue)
    columns = {**table, "joules_per_token": joules, "cost_usd_per_million_tokens": cost,
               "kwh_per_million_tokens": metrics.kwh_per_million_tokens(joules) * pue}
    return pd.DataFrame(columns, columns=pd.Index(list(columns), dtype=object))  # labels as the table's: objects


@data.cached
def _published_columns() -> dict:
    """The published table's names, labels and TPS/kW (:func:`perwatt.catalog.results`): text as
    Series (their dtype kept), the numbers as an array. Read them, never write them."""
    table = catalog.results()
    return {c: table[c] if c != "tps_per_kw" else table[c].to_numpy()
            for c in ("model", "model_label", "system", "system_label", "tps_per_kw")}


@checks.validated(published_basis=checks.rule(checks.choice, ("chip_rated", "jalapeno_measured")))
def same_overhead_comparison(published_basis: PublishedBasis) -> pd.DataFrame:
    """Both sides on an all-in basis, with Jalapeño's unknown overhead set equal to its baseline's.

    InferenceX's all-in figure for an NVIDIA GPU exceeds the GPU's rating by the host,
    network and facility power charged to it. No such figure exists for Jalapeño, so this
    charges Jalapeño its rating plus the *same* overhead in watts: an assumption the
    chapter labels as one, not a measurement. One row per model.
    """
    rows = []
    for model, baseline in pairs()[["model", "baseline"]].itertuples(index=False):
        overhead_w = catalog.power_w(baseline, "all_in_provisioned") - catalog.power_w(baseline, "chip_rated")
        charged_w = catalog.power_w(catalog.CANDIDATE, "chip_rated") + overhead_w
        frame = basis_comparison(published_basis, charged_w, "all_in_provisioned")
        rows.append(frame[frame["model"] == model].assign(assumed_overhead_w=overhead_w))
    return pd.concat(rows, ignore_index=True)


@checks.validated(price_usd_per_kwh=checks.rule(checks.scalar, minimum=0.001,
                                                maximum=checks.MAX_PLAUSIBLE_PRICE_USD_PER_KWH), pue=checks.PUE,
                  energy_basis=checks.rule(checks.choice, ("chip_rated", "all_in_provisioned")))
def hardware_and_energy_cost(price_usd_per_kwh: float, pue: float,
                             energy_basis: BaselineBasis = "chip_rated") -> pd.DataFrame:
    """Rental and electricity cost per million tokens, for systems with a known hourly price.

    Tokens/s per GPU assume the published TPS/kW divided by the GPU's rating. Electricity charges
    each GPU the power of ``energy_basis``: its rating (the published TPS/kW as it stands) or
    InferenceX's all-in watts, which already include the facility, so pass ``pue=1`` with them.
    Systems without a sourced hourly price are left out, not estimated. Rent ÷ electricity needs
    a price of electricity: at least US$0.001 per kWh.
    """
    prices = data.load("hourly_prices").dropna(subset=["price_usd_per_gpu_hour"])
    table = catalog.results().merge(prices[["system", "price_usd_per_gpu_hour"]], on="system")
    rated_w = table["system"].map(lambda s: catalog.power_w(s, "chip_rated"))
    table["tokens_per_s"] = metrics.chip_throughput(table["tps_per_kw"], rated_w)
    table["hardware_usd_per_million_tokens"] = metrics.hardware_cost_per_million_tokens(
        table["price_usd_per_gpu_hour"], table["tokens_per_s"])
    charged_w = table["system"].map(lambda s: catalog.power_w(s, energy_basis))
    joules = metrics.joules_per_token(table["tps_per_kw"]) * charged_w / rated_w
    table["energy_usd_per_million_tokens"] = metrics.energy_cost_per_million_tokens(joules, price_usd_per_kwh, pue)
    table["hardware_to_energy"] = metrics.ratio(table["hardware_usd_per_million_tokens"],
                                                table["energy_usd_per_million_tokens"])
    return table
