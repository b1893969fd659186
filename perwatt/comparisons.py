"""The articles' figures joined with the per-watt model: the frames the chapters show.

Every function here returns a tidy pandas DataFrame built from the validated data files
(:mod:`perwatt.data`) and the formulas in :mod:`perwatt.metrics`. Where an input is
unknown (an empty cell in ``data/``), the derived value stays empty and a ``note``
column says why; nothing is filled in.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal

import numpy as np
import pandas as pd

from perwatt import data, metrics

CANDIDATE = "jalapeno"
BASES = ("chip_measured", "chip_rated", "all_in_provisioned")
BASIS_LABELS = {
    "chip_measured": "chip, measured",
    "chip_rated": "chip, rated",
    "all_in_provisioned": "all-in provisioned",
}
PublishedBasis = Literal["chip_rated", "jalapeno_measured"]
BaselineBasis = Literal["chip_rated", "all_in_provisioned"]
TokenCount = Literal["all", "output"]


def label(frame: pd.DataFrame) -> pd.DataFrame:
    """Add display labels for model and system columns, where present."""
    out = frame.copy()
    if "model" in out:
        out["model_label"] = out["model"].map(data.load("models").set_index("model")["label"])
    systems = data.load("systems").set_index("system")["label"]
    for column in ("system", "baseline"):
        if column in out:
            out[f"{column}_label"] = out[column].map(systems)
    return out


def results() -> pd.DataFrame:
    """The benchmark table, one row per model and system, one column per metric (as reported)."""
    # Figures evaluate the model at every grid point; build the table once per data folder.
    return _results(str(data.data_dir())).copy()


@cache
def _results(directory: str) -> pd.DataFrame:
    long = data.load("benchmark_results", directory)
    wide = long.pivot(index=["model", "system"], columns="metric", values="value").reset_index()
    wide.columns.name = None
    order = {m: i for i, m in enumerate(data.load("models")["model"])}
    wide["_order"] = wide["model"].map(order)
    wide["_candidate_last"] = wide["system"] == CANDIDATE
    wide = wide.sort_values(["_order", "_candidate_last"]).drop(columns=["_order", "_candidate_last"])
    return label(wide.reset_index(drop=True))


def pairs() -> pd.DataFrame:
    """One row per model: Jalapeño's reported TPS/kW beside its baseline's, and the published ratio."""
    return _pairs(str(data.data_dir())).copy()


@cache
def _pairs(directory: str) -> pd.DataFrame:
    table = results()
    candidate = table[table["system"] == CANDIDATE].set_index("model")
    baseline = table[table["system"] != CANDIDATE].set_index("model")
    ratios = data.load("reported_ratios")
    published = ratios[ratios["metric"] == "tps_per_kw"].set_index("model")["reported_ratio"]
    out = pd.DataFrame(
        {
            "baseline": baseline["system"],
            "jalapeno_tps_per_kw": candidate["tps_per_kw"],
            "baseline_tps_per_kw": baseline["tps_per_kw"],
        }
    )
    out["recomputed_ratio"] = metrics.ratio(out["jalapeno_tps_per_kw"], out["baseline_tps_per_kw"])
    out["published_ratio"] = published
    out = out.loc[candidate.index].reset_index()
    return label(out)


def power_w(system: str, basis: str) -> float:
    """Watts for one system on one basis; NaN where the data says unknown."""
    table = _power_lookup(str(data.data_dir()))
    if (system, basis) not in table:
        raise ValueError(f"no power figure for system {system!r} on basis {basis!r} in power.csv")
    return table[(system, basis)]


@cache
def _power_lookup(directory: str) -> dict[tuple[str, str], float]:
    power = data.load("power", directory)
    return {(s, b): float(w) for s, b, w in zip(power["system"], power["basis"], power["power_w"])}


def power_table() -> pd.DataFrame:
    """Power per chip by system (rows) and basis (columns), W; empty where unknown."""
    power = data.load("power")
    table = power.pivot(index="system", columns="basis", values="power_w")
    table = table.reindex(index=data.load("systems")["system"], columns=list(BASES))
    table.columns.name = None
    return table


def implied_chip_throughput() -> pd.DataFrame:
    """Tokens/s per chip that each power basis implies for every reported TPS/kW figure.

    If a figure of *x* tokens/s/kW was computed by dividing by *P* watts, the chip served
    *x · P / 1000* tokens/s. One row per model, system and basis; ``tokens_per_s`` is empty
    where that basis has no known power for the system, and ``note`` says why.
    """
    table = results()[["model", "system", "tps_per_kw"]]
    power = data.load("power")[["system", "basis", "power_w", "bound", "note"]]
    out = table.merge(power, on="system", how="left")
    known = out["power_w"].notna()
    out["tokens_per_s"] = np.nan
    out.loc[known, "tokens_per_s"] = metrics.chip_throughput(
        out.loc[known, "tps_per_kw"], out.loc[known, "power_w"]
    )
    out["basis_label"] = out["basis"].map(BASIS_LABELS)
    return label(out)


def basis_comparison(
    published_basis: PublishedBasis = "chip_rated",
    jalapeno_power_w: float = 700.0,
    baseline_basis: BaselineBasis = "chip_rated",
) -> pd.DataFrame:
    """Jalapeño ÷ baseline tokens/s/kW when each side is charged a chosen power.

    ``published_basis`` is the reader's assumption about what the published TPS/kW figures
    divided by: every chip's rating (``"chip_rated"``), or Jalapeño's measured draw with the
    baselines at their ratings (``"jalapeno_measured"``). That fixes the tokens/s each chip
    served. Those tokens are then divided by ``jalapeno_power_w`` for Jalapeño and by the
    baseline's power on ``baseline_basis``. One row per model.
    """
    if published_basis not in ("chip_rated", "jalapeno_measured"):
        raise ValueError(
            f"published_basis must be 'chip_rated' or 'jalapeno_measured', got {published_basis!r}"
        )
    if baseline_basis not in ("chip_rated", "all_in_provisioned"):
        raise ValueError(
            f"baseline_basis must be 'chip_rated' or 'all_in_provisioned', got {baseline_basis!r}"
        )
    table = pairs()
    jalapeno_published_w = power_w(
        CANDIDATE, "chip_measured" if published_basis == "jalapeno_measured" else "chip_rated"
    )
    baseline_published_w = table["baseline"].map(lambda s: power_w(s, "chip_rated"))
    baseline_charged_w = table["baseline"].map(lambda s: power_w(s, baseline_basis))

    jalapeno_tokens = metrics.chip_throughput(table["jalapeno_tps_per_kw"], jalapeno_published_w)
    baseline_tokens = metrics.chip_throughput(table["baseline_tps_per_kw"], baseline_published_w)
    out = table[["model", "model_label", "baseline", "baseline_label", "published_ratio"]].copy()
    out["jalapeno_tokens_per_s"] = jalapeno_tokens
    out["baseline_tokens_per_s"] = baseline_tokens
    out["jalapeno_charged_w"] = float(jalapeno_power_w)
    out["baseline_charged_w"] = baseline_charged_w
    out["jalapeno_tps_per_kw"] = metrics.tps_per_kw_at(jalapeno_tokens, jalapeno_power_w)
    out["baseline_tps_per_kw"] = metrics.tps_per_kw_at(baseline_tokens, baseline_charged_w)
    out["ratio"] = metrics.ratio(out["jalapeno_tps_per_kw"], out["baseline_tps_per_kw"])
    return out


def workload(name: str = "8k/1k") -> pd.Series:
    """One workload's row: target lengths and the ranges the lengths are drawn from."""
    workloads = data.load("workloads").set_index("workload")
    if name not in workloads.index:
        raise ValueError(f"workload must be one of {list(workloads.index)}, got {name!r}")
    return workloads.loc[name]


@dataclass(frozen=True)
class Lengths:
    """The whole-number token lengths a workload draws per request, uniformly from min to max.

    InferenceX's random dataset draws each request's input and output lengths this way, from
    ``int(target × min_fraction)`` to ``int(target × max_fraction)`` inclusive, and its client runs
    with ``--ignore-eos`` so that every request produces exactly the output length it drew.
    """

    isl_min: int
    isl_max: int
    osl_min: int
    osl_max: int

    @property
    def isl_mean(self) -> float:
        return (self.isl_min + self.isl_max) / 2

    @property
    def osl_mean(self) -> float:
        return (self.osl_min + self.osl_max) / 2

    @property
    def tokens_per_output_token(self) -> float:
        """All tokens over output tokens across a run: E[input + output] ÷ E[output]."""
        return (self.isl_mean + self.osl_mean) / self.osl_mean


def assumption(assumption_id: str) -> float:
    """The default value of a labelled assumption in data/assumptions.csv."""
    table = data.load("assumptions").set_index("assumption_id")
    if assumption_id not in table.index:
        raise ValueError(f"assumption must be one of {list(table.index)}, got {assumption_id!r}")
    return float(table.loc[assumption_id, "value"])


def lengths(name: str = "8k/1k") -> Lengths:
    """The lengths workload ``name`` draws (see :class:`Lengths`)."""
    w = workload(name)
    # int() truncates, as the benchmark client does: int(1024 × 0.8) = 819.
    return Lengths(int(w["isl_tokens"] * w["input_min_fraction"]), int(w["isl_tokens"] * w["input_max_fraction"]),
                   int(w["osl_tokens"] * w["output_min_fraction"]), int(w["osl_tokens"] * w["output_max_fraction"]))


def energy_costs(
    price_usd_per_kwh: float = 0.08,
    pue: float = 1.0,
    tokens: TokenCount = "all",
    workload_name: str = "8k/1k",
) -> pd.DataFrame:
    """Energy per token and its electricity cost, per model and system, from the published TPS/kW.

    ``tokens="all"`` counts input and output tokens, which is the book's reading of the
    published "mixed" figures (the articles do not define the word; InferenceX's throughput
    counts both). ``tokens="output"`` charges the same energy to output tokens alone, at the
    workload's mean drawn lengths. The power basis is whatever the published figures used;
    ``pue`` scales it to the facility.
    """
    if tokens not in ("all", "output"):
        raise ValueError(f"tokens must be 'all' or 'output', got {tokens!r}")
    out = results()[["model", "model_label", "system", "system_label", "tps_per_kw"]].copy()
    joules = metrics.joules_per_token(out["tps_per_kw"])
    if tokens == "output":
        drawn = lengths(workload_name)
        joules = metrics.per_output_token(joules, drawn.isl_mean, drawn.osl_mean)
    out["joules_per_token"] = joules
    out["cost_usd_per_million_tokens"] = metrics.energy_cost_per_million_tokens(
        joules, price_usd_per_kwh, pue
    )
    out["kwh_per_million_tokens"] = metrics.kwh_per_million_tokens(joules) * pue
    return out


def same_overhead_comparison(published_basis: PublishedBasis = "chip_rated") -> pd.DataFrame:
    """Both sides on an all-in basis, with Jalapeño's unknown overhead set equal to its baseline's.

    InferenceX's all-in figure for an NVIDIA GPU exceeds the GPU's rating by the host,
    network and facility power charged to it. No such figure exists for Jalapeño, so this
    charges Jalapeño its rating plus the *same* overhead in watts: an assumption the
    chapter labels as one, not a measurement. One row per model.
    """
    rows = []
    for model, baseline in pairs()[["model", "baseline"]].itertuples(index=False):
        overhead_w = power_w(baseline, "all_in_provisioned") - power_w(baseline, "chip_rated")
        charged_w = power_w(CANDIDATE, "chip_rated") + overhead_w
        frame = basis_comparison(published_basis, charged_w, "all_in_provisioned")
        rows.append(frame[frame["model"] == model].assign(assumed_overhead_w=overhead_w))
    return pd.concat(rows, ignore_index=True)


def hardware_and_energy_cost(price_usd_per_kwh: float = 0.08, pue: float = 1.0) -> pd.DataFrame:
    """Rental and electricity cost per million tokens, for systems with a known hourly price.

    Tokens/s per GPU assume the published TPS/kW divided by the GPU's rating; electricity
    uses the published TPS/kW as it stands. Systems without a sourced hourly price are left
    out, not estimated.
    """
    prices = data.load("hourly_prices").dropna(subset=["price_usd_per_gpu_hour"])
    table = results().merge(prices[["system", "price_usd_per_gpu_hour"]], on="system")
    rated_w = table["system"].map(lambda s: power_w(s, "chip_rated"))
    table["tokens_per_s"] = metrics.chip_throughput(table["tps_per_kw"], rated_w)
    table["hardware_usd_per_million_tokens"] = metrics.hardware_cost_per_million_tokens(
        table["price_usd_per_gpu_hour"], table["tokens_per_s"]
    )
    table["energy_usd_per_million_tokens"] = metrics.energy_cost_per_million_tokens(
        metrics.joules_per_token(table["tps_per_kw"]), price_usd_per_kwh, pue
    )
    table["hardware_to_energy"] = metrics.ratio(
        table["hardware_usd_per_million_tokens"], table["energy_usd_per_million_tokens"]
    )
    return table
