"""Disaggregated serving: prefill on one pool of chips, decode on another, priced per request.

Splitwise and DistServe run the two phases on separate pools. This module prices a request on
such a pair of pools with the serving model's own phase times (:mod:`perwatt.serving`), and on
one pool that does both (:func:`perwatt.serving.serve`), so the two can be compared:

* **Chip time per request.** A prefill instance of ``c`` chips spends ``prefill_per_prompt``
  seconds on each prompt, so a request takes ``c × t_prefill`` chip-seconds there. A decode
  instance of ``c`` chips serving ``B`` sequences runs ``OSL`` passes per request, shared by the
  ``B``: ``c × OSL × t_pass ÷ B`` chip-seconds. A single pool's instance spends ``OSL × TPOT``
  (passes plus the ``B`` prefills that stretch them) per ``B`` requests.
* **Energy and cost.** Chip-seconds × rated watts is the energy; chip-seconds × the hourly
  rental price (data/hourly_prices.csv) plus that energy at an electricity price is the cost.
  Pools are sized to their work, so neither idles (many instances, fractional split).
* **KV transfer.** The prompt's cache moves from the prefill pool to the decode pool over the
  slower of the two chips' scale-out links (at the link efficiency): time added to the time to
  first token, not chip time, on the assumption that it overlaps other requests' work. Where a
  chip's scale-out bandwidth is unpublished the transfer is not modelled (NaN).

:func:`single_pool` counts a pool's busy time; :func:`perwatt.serving.serve`'s energy per token
also counts each request's own wait for its prefill (its TTFT) inside the time its slot is held,
which adds exactly ``c × TTFT ÷ B`` chip-seconds per request (a test checks the identity).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perwatt import catalog, checks, data, parallel, roofline, serving
from perwatt.specs import DEFAULTS, chip, model_spec

#: The model this section serves: the smallest of the articles' three, on any chip here.
MODEL = "gpt-oss-120b"
#: The long-context request: a prompt of this many tokens (an assumption) with 8k/1k's output.
LONG = "long prompt"
#: Tokens/s per user the figure's target control offers.
TARGETS = (20, 50, 100)
JOULES_PER_KWH = 3.6e6
#: What :func:`disaggregated` and :func:`single_pool` return.
KEYS = ("prefill_j", "decode_j", "joules", "prefill_usd", "decode_usd", "usd", "prefill_chips", "decode_chips",
        "decode_batch", "tpot_s", "ttft_s", "transfer_s", "prefill_share")
PRICE = checks.rule(checks.scalar, minimum=0.0, maximum=checks.MAX_PLAUSIBLE_PRICE_USD_PER_KWH)
TARGET = checks.rule(checks.scalar, exclusive_minimum=0.0, maximum=1e5)


def _known_chip(name: str, value) -> str:
    """A chip of data/accelerators.csv, or an error naming the parameter (``prefill_chip``, ...)."""
    checks.instance(name, value, str)
    if value not in roofline.known_chips():
        raise ValueError(f"{name} must be one of {roofline.known_chips()}, got {value!r}")
    return value


@data.cached
def priced_chips() -> tuple[str, ...]:
    """Chips with both a sourced hourly price and a published rated power (the ones a cost per
    request can be computed for), in the order of data/accelerators.csv."""
    return tuple(n for n in roofline.known_chips()
                 if catalog.rental_usd_per_hour(n) is not None and chip(n).power_known)


@checks.validated(accelerator=checks.TEXT)
def usd_per_hour(accelerator: str) -> float:
    """A chip's sourced rental price, US$ per chip-hour (data/hourly_prices.csv)."""
    if accelerator not in priced_chips():
        raise ValueError(f"accelerator must be one of {list(priced_chips())} (a sourced price and power), "
                         f"got {accelerator!r}")
    return float(catalog.rental_usd_per_hour(accelerator))


def workloads() -> tuple[str, ...]:
    """The request mixes: the InferenceX workloads of data/workloads.csv and :data:`LONG`."""
    return (*data.load("workloads")["workload"], LONG)


@checks.validated(workload=checks.TEXT)
def lengths(workload: str) -> tuple[float, float]:
    """Mean drawn (input, output) tokens of a workload; :data:`LONG`'s prompt is the assumption
    ``long_context_isl_tokens``, its output the table workload's."""
    if workload == LONG:
        return catalog.assumption("long_context_isl_tokens"), catalog.lengths().osl_mean
    if workload not in workloads():
        raise ValueError(f"workload must be one of {list(workloads())}, got {workload!r}")
    drawn = catalog.lengths(workload)
    return drawn.isl_mean, drawn.osl_mean


@checks.validated(prefill_chip_s=checks.SECONDS, decode_chip_s=checks.SECONDS,
                  prefill_w=checks.rule(checks.positive), decode_w=checks.rule(checks.positive),
                  prefill_usd_per_hour=checks.rule(checks.nonnegative), decode_usd_per_hour=checks.rule(checks.nonnegative),
                  price_usd_per_kwh=checks.rule(checks.nonnegative, maximum=checks.MAX_PLAUSIBLE_PRICE_USD_PER_KWH))
def request_cost(prefill_chip_s, decode_chip_s, prefill_w, decode_w, prefill_usd_per_hour, decode_usd_per_hour,
                 price_usd_per_kwh) -> dict:
    """Energy (J) and cost (US$) of one request from its chip-seconds in each pool, split by pool:
    rental at US$ per chip-hour plus the chips' rated energy at US$ per kWh (arrays broadcast)."""
    out = {}
    for pool, seconds, watts, rent in (("prefill", prefill_chip_s, prefill_w, prefill_usd_per_hour),
                                       ("decode", decode_chip_s, decode_w, decode_usd_per_hour)):
        out[f"{pool}_j"] = seconds * watts
        out[f"{pool}_usd"] = seconds * rent / 3600 + out[f"{pool}_j"] / JOULES_PER_KWH * price_usd_per_kwh
    out["joules"] = out["prefill_j"] + out["decode_j"]
    out["usd"] = out["prefill_usd"] + out["decode_usd"]
    return out


def _grid(spec, device) -> pd.DataFrame:
    """The serving model's layouts for this chip at every batch it sweeps."""
    return serving.layouts(spec, device).merge(pd.DataFrame({"batch": np.asarray(serving.BATCHES, float)}),
                                               how="cross")


def _fits(spec, device, chips, ep, dp, sequences, context) -> np.ndarray:
    held = parallel.memory_per_chip(spec, chips, ep, dp, sequences, context, DEFAULTS)
    return held <= device.hbm_bytes * DEFAULTS.usable_hbm_fraction


@data.stored
def _phases(model: str, accelerator: str, isl: float, osl: float) -> dict[str, np.ndarray]:
    """:func:`phases`' columns as arrays (read them, never write them: every caller shares them).
    Every layout and batch of one chip, with both phases' times and chip-seconds per request, alone
    (prefill pool, decode pool) and together (one pool, as serving.serve has it)."""
    spec, device = model_spec(model), chip(accelerator)
    g = _grid(spec, device)
    chips, ep, dp, batch = (g[c].to_numpy() for c in ("chips", "ep", "dp_attention", "batch"))
    chips, batch = chips.astype(float), batch.astype(float)
    together = np.where(dp, chips, 1.0)
    t_prefill = serving.prefill_per_prompt(spec, device, isl, chips, ep, dp)
    t_pass = serving.decode_pass(spec, device, batch, isl + osl / 2, chips, ep, dp)
    one = serving.serve(spec, device, batch, isl, osl, chips=chips, ep=ep, dp_attention=dp)
    frame = g.assign(
        prefill_s=t_prefill, prefill_wait_s=t_prefill * together, prefill_chip_s=chips * t_prefill,
        prefill_fits=_fits(spec, device, chips, ep, dp, together, isl),
        tpot_alone_s=t_pass, decode_chip_s=chips * osl * t_pass / batch,
        decode_fits=_fits(spec, device, chips, ep, dp, batch, isl + osl),
        tpot_single_s=one["tpot_s"], ttft_single_s=one["ttft_s"], single_chip_s=chips * osl * one["tpot_s"] / batch,
        single_fits=one["fits"], serve_chip_s=one["e2e_latency_s"] * chips / batch)
    return {name: column.to_numpy() for name, column in frame.items()}


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, workload=checks.TEXT)
def phases(model: str, accelerator: str, workload: str) -> pd.DataFrame:
    """One row per layout and batch of ``accelerator`` (:func:`perwatt.serving.layouts` × the
    swept batches): seconds and chip-seconds per request of each phase on its own pool
    (``prefill_*``, ``decode_*``, ``tpot_alone_s``), and of one pool doing both (``single_*``,
    ``tpot_single_s``; ``serve_chip_s`` as :func:`perwatt.serving.serve`'s energy counts it),
    with whether each fits in memory."""
    isl, osl = lengths(workload)
    return pd.DataFrame(_phases(model, accelerator, isl, osl))


@checks.validated(model=checks.TEXT, prefill_chip=_known_chip, decode_chip=_known_chip,
                  isl=checks.rule(checks.scalar, minimum=1.0, maximum=checks.MAX_TOKENS))
def kv_transfer_s(model: str, prefill_chip: str, decode_chip: str, isl) -> float:
    """Seconds to move one prompt's KV cache between the pools, over the slower chip's scale-out
    link at the serving model's link efficiency; NaN where either link is unpublished (not modelled)."""
    return _transfer_s(_prompt_kv_bytes(model, isl), chip(prefill_chip).scale_out_bytes_s,
                       chip(decode_chip).scale_out_bytes_s)


def _prompt_kv_bytes(model: str, isl):
    return roofline.kv_bytes(model_spec(model), isl, DEFAULTS.kv_bits)


def _transfer_s(kv_bytes, prefill_link_bytes_s: float, decode_link_bytes_s: float) -> float:
    """:func:`kv_transfer_s` from the prompt's cache bytes and each chip's scale-out link."""
    # np.minimum, not min(): an unpublished (NaN) link on either side leaves the transfer unknown.
    link = float(np.minimum(prefill_link_bytes_s, decode_link_bytes_s))
    if not np.isfinite(link):
        return float("nan")
    return float(kv_bytes / (link * DEFAULTS.link_efficiency))


def _cheapest(columns: dict[str, np.ndarray], usd_per_chip_s: float, seconds: str, keep) -> dict | None:
    """The row of ``columns`` among ``keep`` whose ``seconds`` cost least (the first such, skipping
    NaN, as pandas' idxmin), as a dict; None if ``keep`` holds no row."""
    where = np.flatnonzero(keep)
    if not len(where):
        return None
    row = where[np.nanargmin(columns[seconds][where] * usd_per_chip_s)]
    return {name: values[row].item() for name, values in columns.items()}


def _usd_per_chip_s(watts: float, usd_per_chip_hour: float, price_usd_per_kwh: float) -> float:
    return usd_per_chip_hour / 3600 + watts / JOULES_PER_KWH * price_usd_per_kwh


def _priced(accelerator: str) -> tuple[float, float]:
    """A chip's rated watts and US$ per chip-hour (a ValueError if it has no sourced price)."""
    return chip(accelerator).power_w, usd_per_hour(accelerator)


@checks.validated(model=checks.TEXT, prefill_chip=_known_chip, decode_chip=_known_chip, workload=checks.TEXT,
                  min_tokens_per_s_per_user=TARGET, price_usd_per_kwh=PRICE)
def disaggregated(model: str, prefill_chip: str, decode_chip: str, workload: str, min_tokens_per_s_per_user: float,
                  price_usd_per_kwh: float) -> dict:
    """The cheapest request on a prefill pool of ``prefill_chip`` and a decode pool of ``decode_chip``
    whose decode reaches ``min_tokens_per_s_per_user``: each pool's layout (and the decode batch)
    chosen for the least cost per request. Returns per-pool and total joules and US$ per request,
    the layouts, TPOT and TTFT (s: the prefill wait plus the KV transfer), the transfer's seconds
    (NaN where a scale-out link is unpublished) and each pool's share of the chips. The values are
    None where no layout fits or reaches the target."""
    isl, osl = lengths(workload)
    prefill_phases, prefill = _phases(model, prefill_chip, isl, osl), _priced(prefill_chip)
    p = _prefill_pool(prefill_phases, _usd_per_chip_s(*prefill, price_usd_per_kwh))
    decode_phases, decode = _phases(model, decode_chip, isl, osl), _priced(decode_chip)
    d = _decode_pool(decode_phases, min_tokens_per_s_per_user, _usd_per_chip_s(*decode, price_usd_per_kwh))
    return _split(p, d, *prefill, *decode, kv_transfer_s.unchecked(model, prefill_chip, decode_chip, isl),
                  price_usd_per_kwh)


def _prefill_pool(columns: dict[str, np.ndarray], usd_per_chip_s: float) -> dict | None:
    """The cheapest prefill-pool row of one chip's :func:`_phases`."""
    return _cheapest(columns, usd_per_chip_s, "prefill_chip_s", columns["prefill_fits"])


def _decode_pool(columns: dict[str, np.ndarray], min_tokens_per_s_per_user: float,
                 usd_per_chip_s: float) -> dict | None:
    """The cheapest decode-pool row of one chip's :func:`_phases` that reaches the target."""
    return _cheapest(columns, usd_per_chip_s, "decode_chip_s",
                     columns["decode_fits"] & (columns["tpot_alone_s"] <= 1 / min_tokens_per_s_per_user))


def _split(p: dict | None, d: dict | None, prefill_w: float, prefill_usd_per_hour: float, decode_w: float,
           decode_usd_per_hour: float, transfer_s: float, price_usd_per_kwh: float) -> dict:
    """:func:`disaggregated`'s result from each pool's cheapest row (None: that pool has none), its
    chips' watts and hourly prices, and the KV transfer's seconds."""
    if p is None or d is None:
        return dict.fromkeys(KEYS)
    cost = request_cost.unchecked(p["prefill_chip_s"], d["decode_chip_s"], prefill_w, decode_w, prefill_usd_per_hour,
                                  decode_usd_per_hour, price_usd_per_kwh)
    return {**{k: float(v) for k, v in cost.items()}, "prefill_chips": float(p["chips"]),
            "decode_chips": float(d["chips"]), "decode_batch": float(d["batch"]), "tpot_s": float(d["tpot_alone_s"]),
            "ttft_s": float(p["prefill_wait_s"] + transfer_s), "transfer_s": transfer_s,
            "prefill_share": float(p["prefill_chip_s"] / (p["prefill_chip_s"] + d["decode_chip_s"]))}


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, workload=checks.TEXT,
                  min_tokens_per_s_per_user=TARGET, price_usd_per_kwh=PRICE)
def single_pool(model: str, accelerator: str, workload: str, min_tokens_per_s_per_user: float,
                price_usd_per_kwh: float) -> dict:
    """The cheapest request on one pool of ``accelerator`` that prefills and decodes
    (:func:`perwatt.serving.serve`'s TPOT, stretched by the prefills, reaching the target), with
    its busy chip-seconds split into the prefill and decode parts. Keys as :func:`disaggregated`'s
    (the transfer is 0, the prefill share is of the busy time); None where nothing qualifies."""
    isl, osl = lengths(workload)
    columns = _phases(model, accelerator, isl, osl)
    return _single(columns, min_tokens_per_s_per_user, price_usd_per_kwh, *_priced(accelerator))


def _single(columns: dict[str, np.ndarray], min_tokens_per_s_per_user: float, price_usd_per_kwh: float, watts: float,
            usd_per_chip_hour: float) -> dict:
    """:func:`single_pool` on one chip's :func:`_phases`, its watts and hourly price."""
    s = _cheapest(columns, _usd_per_chip_s(watts, usd_per_chip_hour, price_usd_per_kwh), "single_chip_s",
                  columns["single_fits"] & (columns["tpot_single_s"] <= 1 / min_tokens_per_s_per_user))
    if s is None:
        return dict.fromkeys(KEYS)
    prefill_s = s["prefill_chip_s"]  # the prompts' share of the busy time: B prefills per B requests
    cost = request_cost(prefill_s, s["single_chip_s"] - prefill_s, watts, watts, usd_per_chip_hour, usd_per_chip_hour,
                        price_usd_per_kwh)
    return {**{k: float(v) for k, v in cost.items()}, "prefill_chips": float(s["chips"]),
            "decode_chips": float(s["chips"]), "decode_batch": float(s["batch"]), "tpot_s": float(s["tpot_single_s"]),
            "ttft_s": float(s["ttft_single_s"]), "transfer_s": 0.0,
            "prefill_share": float(prefill_s / s["single_chip_s"])}


@checks.validated(model=checks.TEXT, workload=checks.TEXT, min_tokens_per_s_per_user=TARGET, price_usd_per_kwh=PRICE)
def comparison(model: str, workload: str, min_tokens_per_s_per_user: float, price_usd_per_kwh: float) -> pd.DataFrame:
    """Every way to serve the request on :func:`priced_chips`: one pool of each chip, and every
    pair of prefill and decode chips. One row per configuration (``kind`` "single" or "split"),
    with :func:`disaggregated`'s keys and ``vs_best_single``, its cost per request over the
    cheapest single pool's (below 1, the split is cheaper). Configurations that cannot reach the
    target are left out."""
    isl, osl = lengths(workload)
    chips = priced_chips()
    # Each chip's phases, prices, cheapest prefill pool and cheapest decode pool do not depend on
    # its partner: find them once, then price every pairing (as disaggregated does, pair by pair).
    columns = {c: _phases(model, c, isl, osl) for c in chips}
    priced = {c: _priced(c) for c in chips}
    per_chip_s = {c: _usd_per_chip_s(*priced[c], price_usd_per_kwh) for c in chips}
    rows = [{"kind": "single", "prefill_chip": a, "decode_chip": a,
             **_single(columns[a], min_tokens_per_s_per_user, price_usd_per_kwh, *priced[a])} for a in chips]
    pre = {c: _prefill_pool(columns[c], per_chip_s[c]) for c in chips}
    dec = {c: _decode_pool(columns[c], min_tokens_per_s_per_user, per_chip_s[c]) for c in chips}
    kv_bytes, links = _prompt_kv_bytes(model, isl), {c: chip(c).scale_out_bytes_s for c in chips}
    rows += [{"kind": "split", "prefill_chip": p, "decode_chip": d,
              **_split(pre[p], dec[d], *priced[p], *priced[d], _transfer_s(kv_bytes, links[p], links[d]),
                       price_usd_per_kwh)} for p in chips for d in chips]
    frame = pd.DataFrame(rows).dropna(subset=["usd"]).reset_index(drop=True)
    if frame.empty:
        raise ValueError(f"min_tokens_per_s_per_user: no configuration of {model} reaches "
                         f"{min_tokens_per_s_per_user:g} tokens/s per user on {workload}")
    single = frame.loc[frame["kind"] == "single", "usd"]
    frame["vs_best_single"] = frame["usd"] / (single.min() if len(single) else np.nan)
    return frame
