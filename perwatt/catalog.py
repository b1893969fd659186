"""The book's named things and scenario defaults, looked up in ``data/``.

Every model module imports this one rather than each other: the candidate system and its
baselines, display labels, power figures per basis, the workloads and the lengths they draw,
source titles, and the labelled assumptions the scenarios start from. Nothing here computes a
chapter's result; each value is read from a data file (or is the name of something in one).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from perwatt import data

#: The system the book tests; every other system in a model's rows is that model's baseline.
CANDIDATE = "jalapeno"
#: The power bases of power.csv, in the order the book shows them.
BASES = ("chip_measured", "chip_rated", "all_in_provisioned")
BASIS_LABELS = {"chip_measured": "chip, measured", "chip_rated": "chip, rated",
                "all_in_provisioned": "all-in provisioned"}


def label(frame: pd.DataFrame) -> pd.DataFrame:
    """Add display labels for model and system columns, where present. A name the book does not
    know (a reader's own model or system) is its own label."""
    out = frame.copy()
    models, systems = _labels("models", "model"), _labels("systems", "system")
    if "model" in out:
        out["model_label"] = out["model"].map(models).fillna(out["model"])
    for column in ("system", "baseline"):
        if column in out:
            out[f"{column}_label"] = out[column].map(systems).fillna(out[column])
    return out


@data.cached
def _labels(resource: str, key: str) -> dict[str, str]:
    table = data.load(resource)
    return dict(zip(table[key], table["label"]))


def model_label(name: str) -> str:
    """One model's display label, as :func:`label` gives it (a model the book does not know is its own label)."""
    return _labels("models", "model").get(name, name)


def system_label(name: str) -> str:
    """One system's display label, as :func:`label` gives it (a system the book does not know is its own label)."""
    return _labels("systems", "system").get(name, name)


def wide(long: pd.DataFrame) -> pd.DataFrame:
    """A benchmark table in long form (model, system, metric, value) as one row per model and
    system, in the order the rows first appear, with one column per metric."""
    order = list(dict.fromkeys(zip(long["model"], long["system"])))
    table = long.pivot(index=["model", "system"], columns="metric", values="value").reindex(order)
    table = table.reset_index()
    table.columns.name = None
    return table


@data.cached
def results() -> pd.DataFrame:
    """The articles' table, one labelled row per model and system, the candidate after its baseline."""
    table = wide(data.load("benchmark_results"))
    order = {m: i for i, m in enumerate(data.load("models")["model"])}
    table = table.assign(_order=table["model"].map(order), _last=table["system"] == CANDIDATE)
    table = table.sort_values(["_order", "_last"]).drop(columns=["_order", "_last"])
    return label(table.reset_index(drop=True))


@data.cached
def baselines() -> dict[str, str]:
    """The NVIDIA system each model was compared against (baselines.csv)."""
    table = data.load("baselines")
    return dict(zip(table["model"], table["baseline_system"]))


@data.cached
def _power_lookup() -> dict[tuple[str, str], float]:
    power = data.load("power")
    return {(s, b): float(w) for s, b, w in zip(power["system"], power["basis"], power["power_w"])}


def power_w(system: str, basis: str) -> float:
    """Watts for one system on one basis; NaN where the data says unknown."""
    table = _power_lookup()
    if (system, basis) not in table:
        raise ValueError(f"no power figure for system {system!r} on basis {basis!r} in power.csv")
    return table[(system, basis)]


@data.cached
def table_workload() -> str:
    """The workload behind the articles' table (the one workloads.csv marks)."""
    workloads = data.load("workloads")
    return str(workloads.loc[workloads["behind_table"], "workload"].iloc[0])


@data.cached
def _workload_rows() -> dict[str, pd.Series]:
    # Looked up thousands of times a chapter: indexing the table each time was most of the cost.
    workloads = data.load("workloads").set_index("workload")
    return {str(name): row for name, row in workloads.iterrows()}


def workload(name: str | None = None) -> pd.Series:
    """One workload's row (the table's by default): target lengths and the ranges drawn from."""
    rows = _workload_rows()
    name = table_workload() if name is None else name
    if name not in rows:
        raise ValueError(f"workload must be one of {list(rows)}, got {name!r}")
    return rows[name].copy()


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


@data.cached
def lengths(name: str | None = None) -> Lengths:
    """The lengths a workload draws (the table's by default; see :class:`Lengths`)."""
    w = workload(name)
    # int() truncates, as the benchmark client does: int(1024 × 0.8) = 819.
    return Lengths(int(w["isl_tokens"] * w["input_min_fraction"]), int(w["isl_tokens"] * w["input_max_fraction"]),
                   int(w["osl_tokens"] * w["output_min_fraction"]), int(w["osl_tokens"] * w["output_max_fraction"]))


def measured(workload_name: str | None = None) -> pd.DataFrame:
    """Measured InferenceX DeepSeek-R1 points (data/inferencex_dsr1.csv): all three workloads, or one
    (``"1k/1k"``, ``"8k/1k"`` or ``"1k/8k"``), in the snapshot's order."""
    table = data.load("inferencex_dsr1")
    if workload_name is None:
        return table
    known = list(dict.fromkeys(table["workload"]))
    if workload_name not in known:
        raise ValueError(f"workload_name must be one of {known}, got {workload_name!r}")
    return table[table["workload"] == workload_name].reset_index(drop=True)


@data.cached
def assumptions() -> dict[str, float]:
    table = data.load("assumptions")
    return dict(zip(table["assumption_id"], table["value"].astype(float)))


def assumption(assumption_id: str) -> float:
    """The default value of a labelled assumption in data/assumptions.csv."""
    table = assumptions()
    if assumption_id not in table:
        raise ValueError(f"assumption must be one of {sorted(table)}, got {assumption_id!r}")
    return table[assumption_id]


@data.cached
def _pues() -> dict[str, float]:
    table = data.load("pue")
    return {str(c): float(p) for c, p in zip(table["cooling"], table["pue"])}


def facility_pue(cooling: str = "direct liquid") -> float:
    """InferenceX's PUE for a cooling type (pue.csv); NVL72 racks are liquid-cooled."""
    table = _pues()
    if cooling not in table:
        raise ValueError(f"cooling must be one of {list(table)}, got {cooling!r}")
    return table[cooling]


def source_titles() -> dict[str, str]:
    """The title the book cites each source by."""
    sources = data.load("sources")
    return dict(zip(sources["source_id"], sources["title"]))


def article_ids() -> list[str]:
    """The articles the book is about (the sources with a text beside the repository), in order."""
    sources = data.load("sources")
    return list(sources.loc[(sources["kind"] == "article") & sources["file"].notna(), "source_id"])


def accelerator_label(name: str) -> str:
    labels = _labels("accelerators", "accelerator")
    if name not in labels:
        raise KeyError(name)  # as the table lookup it replaces raised
    return str(labels[name])


@data.cached
def _rental_prices() -> dict[str, float]:
    prices = data.load("hourly_prices").dropna(subset=["price_usd_per_gpu_hour"])
    return {str(s): float(p) for s, p in zip(prices["system"], prices["price_usd_per_gpu_hour"])}


def rental_usd_per_hour(system: str) -> float | None:
    """InferenceX's price per GPU-hour for ``system``, US$ (data/hourly_prices.csv); None where it
    publishes none (GB300's placeholder is not adopted) or the system is not listed. Every model
    that rents a chip reads its price here."""
    return _rental_prices().get(system)
