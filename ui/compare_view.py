"""The Compare page drawn: the runs chosen with the lengths and samples they are measured at, their accuracy,
target mass and carriers overlaid one colour a run, the key numbers with what each means, and the rules on
each run. The figures come from ui.analyses.comparisons (the same request as the Dilution page's)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from lengen.presets import DILUTION_LONGEST, DILUTION_SAMPLES, LONGEST_CHOICES, single_head_presets
from lengen_core.analysis.carrier import BASELINE_SEEDS
from lengen_core.claims import expectation
from lengen_core.config import DELAY_TASKS
from lengen_core.thresholds import ACCURACY_BAR, PREDICTION_BOUND
from ui.analyses import rule_lengths, rule_note
from ui.captions import accuracy as accuracy_captions
from ui.captions import mechanism as mechanism_captions
from ui.captions import prediction as prediction_captions
from ui.captions import show
from ui.captions.common import Caption, listed
from ui.charts import compare as compare_charts
from ui.rules import view as rules_view
from ui.runs import request_caption, run_labels, run_options, stored_configs
from ui.state import show_view, view_flag, view_number, view_runs
from ui.widgets import chart

LONGEST, SAMPLES = list(LONGEST_CHOICES), [64, 128, 256, 512]
MEANINGS = {  # what each key number is, listed under the table
    "learned": f"The run's verdict: ≥ {ACCURACY_BAR:.2f} at the training length on 2,048 fresh "
          "answers.",
    "past L_train": "The verdict at twice the training length: is accuracy "
          "there at chance (1/V)?",
    "accuracy at 4×": "Accuracy at 4 × the training length.",
    "m_out (95%)": "Fitted effective margin of the dilution law with its 95% "
          "bootstrap interval; no law for a run that did not learn, is "
          "at chance past training, or is a transformer.",
    "horizon, predicted": "The largest length whose accuracy predicted from the "
          f"weights is ≥ {ACCURACY_BAR:.2f}, looked for up to 2^20 tokens (or the "
          "end of a learned table): the Dilution page's figure.",
    "prediction": "Whether the prediction from the weights can be trusted for this run: untrusted where it "
          f"misses the measurement by more than {PREDICTION_BOUND:g} beyond its interval, or rests on an "
          "approximation that does not hold there (docs/prediction.md); the reasons are listed below the table.",
    "Toeplitz": "Toeplitz fraction of the centred mean logit "
          "matrix: 1 means the logit depends on t − u alone.",
    "Toeplitz untrained": "The same metric for the run's "
          "untrained initialisation, and in brackets its range over "
          f"{BASELINE_SEEDS} initialisations of the same config: a "
          "trained value inside it is no change. Exact, from the weights.",
    "argmax Δ": "Where the carrier s(Δ) peaks in the training range; k when aligned.",
    "carrier": "analytic: read from the weights; measured: the expected logit at each offset, from the weights.",
    "samples": "Random sequences per length behind every number.",
}


def chosen_runs() -> tuple[list[str], dict[str, str], int, int]:
    """The runs picked (a delay task's runs are read on the Delays page, not here), the longest length and the
    samples, each from a link where it names them and written back into it: (chosen, names, longest, samples)."""
    configs = stored_configs()  # a delay task's run is read against the delay, on the Delays page
    options = [run_id for run_id in run_options() if run_id not in configs or configs[run_id].task.task not in DELAY_TASKS]
    run_names = run_labels(options)
    view_runs("compare-runs", "compare", options, list(single_head_presets().values()))
    st.session_state["compare-runs"] = [run_id for run_id in st.session_state["compare-runs"] if run_id in options]
    left, middle, right = st.columns([3, 1, 1])
    with middle:
        view_number("compare-longest", "longest", LONGEST[0], LONGEST[-1], DILUTION_LONGEST, LONGEST)  # the default request
    with right:
        view_number("compare-samples", "samples", SAMPLES[0], SAMPLES[-1], DILUTION_SAMPLES, SAMPLES)
    chosen = left.multiselect(
        "Runs", options, key="compare-runs", format_func=run_names.__getitem__,
        help="Presets ship with the app; runs you train on the Train page are added here. Each ends with the start "
             "of its run id.",
    )
    longest = middle.select_slider(
        "Longest test length", LONGEST, key="compare-longest",
        format_func=lambda n: f"2^{n.bit_length() - 1} = {n:,}",
        help="Lengths double from each run's training length up to this one (transformers stop at 16×, "
             "a learned table at its end).",
    )
    samples = right.select_slider("Samples per length", SAMPLES, key="compare-samples",
                                  help="Random sequences per length; more samples, less noise, more time.")
    show_view("compare", chosen)
    show_view("longest", str(longest))
    show_view("samples", str(samples))
    return chosen, run_names, longest, samples


def curve_table(labels: dict, results: dict) -> pd.DataFrame:
    """Accuracy (with its 95% interval) and target mass of every run at every length: the accuracy and mass
    charts and their CSVs. Keyed by run id; `run` is the legend's label."""
    return pd.concat([
        pd.DataFrame({"run_id": i, "run": labels[i], "length": r.lengths, "samples": r.samples, "accuracy": r.accuracy,
                      "accuracy_low": r.accuracy_low, "accuracy_high": r.accuracy_high, "target_mass": r.target_mass,
                      "predicted_mass": np.nan if r.predicted_mass is None else r.predicted_mass})
        for i, r in results.items()
    ], ignore_index=True)


def carrier_table(labels: dict, results: dict, window: int) -> pd.DataFrame:
    """Each run's carrier s(Δ) at the offsets below `window`, keyed by run id (`run`: the legend's label)."""
    carriers = pd.concat([
        pd.DataFrame({"run_id": i, "run": labels[i], "offset": r.carrier_offsets, "s": r.carrier_values,
                      "source": r.carrier_source})
        for i, r in results.items()
    ], ignore_index=True)
    return carriers[carriers["offset"] < window].reset_index(drop=True)


def overlays(labels: dict, results: dict, runs: dict, samples: int) -> None:
    """Accuracy, target mass and the carriers of every run compared, one colour a run, each captioned from
    the runs' own numbers."""
    configs = {run_id: run.config for run_id, run in runs.items()}
    learned = {run_id: None if run.verdict is None else run.verdict.learned for run_id, run in runs.items()}
    curves = curve_table(labels, results)
    chance = min(1 / c.task.vocab_size for c in configs.values())
    chart(compare_charts.accuracy_overlay(curves, chance),
          accuracy_captions.curves_caption(
              [accuracy_captions.run_curve(labels[i], configs[i], runs[i].verdict, r.lengths, r.accuracy,
                                           r.accuracy_low, every_position=configs[i].task.task == "shift")
               for i, r in results.items()],
              note=f"Bands: 95% Wilson intervals over {samples} sequences per length."),
          curves, "compare-accuracy")
    chart(compare_charts.mass_overlay(curves),
          accuracy_captions.masses_caption(
              [(labels[i], r.lengths, r.target_mass) for i, r in results.items()],
              [accuracy_captions.mass_caption(labels[i], r.lengths, r.target_mass, r.predicted_mass, r.fit,
                                              configs[i].task.train_length, sems=r.target_mass_sem)
               for i, r in results.items()]),
          curves, "compare-mass")
    window = 4 * max(c.task.train_length for c in configs.values())  # Δ shown: up to 4 × the longest training
    view_flag("compare-scaled", "scaled", True)
    scaled = st.toggle("Scale each carrier to its peak", key="compare-scaled",
                       help="On: each carrier minus its mean, divided by its largest |value|, so shapes compare. "
                            "Off: in nats, minus the mean (RoPE's carrier is far larger than the others).")
    carriers = carrier_table(labels, results, window)
    show_view("scaled", "true" if scaled else "false")
    centred = carriers["s"] - carriers.groupby("run")["s"].transform("mean")
    carriers["shown"] = centred / centred.abs().groupby(carriers["run"]).transform("max") if scaled else centred
    alignment = "; ".join(
        mechanism_captions.alignment_caption(
            f"**{labels[i]}** ({r.carrier_source})", r.carrier_values, configs[i].task.train_length,
            configs[i].task.offset, expectation(configs[i].model.encoding, configs[i].model.attention).carrier,
            learned[i])
        for i, r in results.items())
    chart(compare_charts.carrier_overlay(carriers, [c.task.train_length for c in configs.values()],
                                         [c.task.offset for c in configs.values()],
                                         "Carriers s(Δ), each scaled to its peak" if scaled
                                         else "Carriers s(Δ), each minus its mean",
                                         "s(Δ) / peak" if scaled else "s(Δ) − mean (nats)"),
          mechanism_captions.carriers_caption(
              [(labels[i], mechanism_captions.is_aligned(r.carrier_values, configs[i].task.train_length, configs[i].task.offset))
               for i, r in results.items()],
              f"{alignment}. Analytic carriers are read from the weights at every Δ; measured ones are the expected "
              "logit at each offset, also computed from the weights."),
          carriers, "compare-carriers")


def key_numbers(labels: dict, results: dict, runs: dict) -> None:
    """The key numbers, one column a run, with what each means, the runs the prediction cannot be trusted for,
    the Toeplitz reading beside its untrained range, and what each run was measured at."""
    st.subheader("Key numbers")
    numbers = compare_charts.key_numbers(labels, results, runs)
    by_quantity = compare_charts.by_quantity(numbers)
    st.table(by_quantity.set_index("quantity"))  # static: a long cell wraps instead of being cut (st.dataframe's are)
    with st.expander("What each number means"):
        st.markdown("\n".join(f"- **{name}**: {text}" for name, text in MEANINGS.items()))
    if untrusted := prediction_captions.untrusted_text({labels[i]: r.measurement.prediction_status
                                                       for i, r in results.items()}):
        st.warning(untrusted)
    toeplitz = "; ".join(mechanism_captions.toeplitz_caption(labels[i], r.toeplitz_fraction, r.toeplitz_baseline,
                                                           r.toeplitz_range, r.toeplitz_relative, r.baseline_seeds)
                         for i, r in results.items())
    briefs = [mechanism_captions.toeplitz_brief(labels[i], r.toeplitz_fraction, r.toeplitz_range, r.toeplitz_relative)
              for i, r in results.items()]
    show.caption(Caption(f"**What to look for:** the Toeplitz fraction (1: the logit depends on t − u alone), trained "
                         f"against untrained: {listed(briefs)}.",
                         f"Toeplitz near 1 says the logit depends on t − u (equivariance); a RoPE head has that by "
                         f"construction, trained or not, so read it beside its untrained range: {toeplitz}. Whether a "
                         "rule was learned is the verdict and the carrier's peak at k (above)."), "More on these numbers")
    figures = compare_charts.key_figures(labels, results, runs)
    st.download_button("Download key numbers (CSV)", figures.to_csv(index=False).encode(), "compare-numbers.csv",
                       "text/csv", help="The table above as data: one row per run, keyed by its run id; numbers as "
                                        "numbers, each interval in its own columns (m_out_low, m_out_high).")
    measured_as = " ".join(f"**{labels[i]}**: {request_caption(i, r.measurement, 'this page')}"
                           for i, r in results.items() if r.measurement.closed_form)
    if measured_as:
        spans = [f"{labels[i]} at {len(r.lengths)} lengths to {r.lengths[-1]:,}" for i, r in results.items()
                 if r.measurement.closed_form]
        samples = sorted({r.measurement.samples for r in results.values()})
        show.caption(Caption(f"Measured {listed(spans)}, {' or '.join(f'{n:,}' for n in samples)} sequences a length.",
                             measured_as),
                     "How each run was measured")


def rules(labels: dict, results: dict, runs: dict, samples: int) -> None:
    """Each compared run under each rule chosen, at the page's lengths up to the rules' longest."""
    ruled = {run_id: rule_lengths(r.lengths) for run_id, r in results.items()}
    if note := next((rule_note(r.lengths, ruled[i]) for i, r in results.items() if rule_note(r.lengths, ruled[i])),
                    None):
        show.caption(note, "Why not every length")
    rules_view.compare_rules(labels, runs, ruled, samples)
