"""The Dilution page: accuracy and target mass against length, the prediction from the weights, the fitted law
(C1, C6, C7), all read from one measurement of the run (lengen_core.measure, through ui.runs.dilution_data): the
horizon the chart's caption names is the Measurement's `measured_horizon`, the one ui.reach.show_horizon shows."""

from __future__ import annotations

import streamlit as st

from lengen.presets import DILUTION_LONGEST, DILUTION_LONGEST_CHOICES, DILUTION_SAMPLES, dilution_lengths
from lengen_core.analysis.fit import LAW_TOLERANCE
from lengen_core.config import ConfigError
from lengen_core.training import Run
from ui import widgets
from ui.address import stop
from ui.analyses import dilution_look_for, rule_lengths, rule_note
from ui.captions import accuracy as accuracy_captions
from ui.captions import prediction as prediction_captions
from ui.captions import readouts, show
from ui.captions.common import Caption
from ui.charts import common as charts
from ui.rules import view as rules_view
from ui.runs import DilutionData, allowed_lengths, dilution_data, request_caption
from ui.state import show_view, view_number

LONGEST, SAMPLES = list(DILUTION_LONGEST_CHOICES), [64, 128, 256, 512, 1024]


def controls() -> tuple[int, int]:
    """The longest test length and the samples per length (from the link, else the defaults)."""
    left, right = st.columns([2, 1])
    with left:
        view_number("dilution-longest", "longest", LONGEST[0], LONGEST[-1], DILUTION_LONGEST, LONGEST)
    with right:
        view_number("dilution-samples", "samples", SAMPLES[0], SAMPLES[-1], DILUTION_SAMPLES, SAMPLES)
    longest = left.select_slider(
        "Longest test length", LONGEST, key="dilution-longest",
        format_func=lambda n: f"2^{n.bit_length() - 1} = {n:,}",
        help="Lengths double from the training length up to this one. 2^20 takes about 15 s on a CPU.",
    )
    samples = right.select_slider("Samples per length", SAMPLES, key="dilution-samples",
                                  help="Random sequences per length: more samples narrow the Wilson band.")
    show_view("longest", str(longest))
    show_view("samples", str(samples))
    return longest, samples


def measured_lengths(run: Run, longest: int) -> tuple[tuple[int, ...], str | None]:
    """The lengths measured, doubling up to `longest` as far as the run's encoding accepts, and what stops them
    short of it (None: nothing)."""
    wanted = dilution_lengths(run.config, longest)
    lengths = tuple(allowed_lengths(run.run_id, list(wanted)))
    refused = readouts.length_refusal(run.config, run.model, [n for n in wanted if n not in lengths])
    return lengths, readouts.longest_note(run.config.task.train_length, longest, wanted, lengths, refused)


def measured(run: Run, lengths: tuple[int, ...], samples: int) -> DilutionData:
    """The run's one measurement at `lengths`, or the page stops with why it is not evaluated here."""
    try:  # lengen_core.measure: priced whole before any work, the numbers of `evaluate` on the command line
        return dilution_data(run.run_id, lengths, samples)
    except ConfigError as error:  # over this server's budget (lengen.budget)
        widgets.refusal("Not evaluated here", error)
        stop()


def key_numbers(run: Run, data: DilutionData, samples: int, short_of_longest: str | None) -> None:
    """Accuracy at the longest length, the fitted m_out and the fit's largest error, and the law's reading."""
    result, last = data.result, data.reports[-1]
    fit = result.fit
    a, b, c = st.columns(3)
    a.metric(f"Accuracy at L = {last.length:,}" + (" (longest measured)" if short_of_longest else ""),
             f"{last.accuracy:.2f}", delta=f"95%: {last.accuracy_low:.3f} to {last.accuracy_high:.3f}",
             delta_color="off", delta_arrow="off",
             help=f"Measured at the query on {last.samples:,} sequences at the longest test length; the interval is "
                  "95% Wilson." + (f" {short_of_longest}" if short_of_longest else ""))
    b.metric("m_out (fitted)", "—" if fit is None else f"{fit.m_out:.2f}",
             delta=None if fit is None else f"95%: {fit.quoted_low:.2f} to {fit.quoted_high:.2f}", delta_color="off",
             delta_arrow="off",
             help="Effective margin of the target over far keys in 1/p(L) = 1/p(L_train) + K(L)·e^(−m_out), K(L) the "
                  "keys past L_train counted by the weight the model's carrier gives them (L − L_train were they all "
                  "equal), fitted to the measured p (smallest largest relative error). The interval is the one to "
                  "quote: a bootstrap over the evaluation samples joined with m_out refitted to every shorter window "
                  "of lengths and with each length left out, since m_out depends on the lengths fitted; the caption "
                  "below gives the answers' interval alone and the plain law's m_out (every far key counted one).")
    c.metric("Largest error of the fit", "—" if fit is None else f"{fit.max_relative_error:.0%}",
             delta=None if fit is None else ("law describes this run" if fit.holds else
                                             f"law does not describe this run (worst at {fit.worst_length:,})"),
             delta_color="off" if fit is None or fit.holds else "inverse", delta_arrow="off",
             help=f"max |p_fit − p| / p over the measured lengths the law was fitted to; within {LAW_TOLERANCE:.0%} "
                  "the law describes this run. R² cannot tell (it was 0.96 for learned positions and 0.9999999 for "
                  "NoPE).")
    if short_of_longest:
        st.caption(short_of_longest)
    law = readouts.fit_caption(result)  # its lead is the run's one dilution verdict (ui.captions.regime)
    show.caption(Caption(f"**m_out: {accuracy_captions.m_out_text(result, samples)}.** {law.lead}",
                         f"{law.more} {request_caption(run.run_id, data.measurement, 'this page')}"), "More on the fit")


def curves(run: Run, data: DilutionData, lengths: tuple[int, ...], samples: int) -> None:
    """Accuracy against length with the prediction, the prediction's trust, 1/p against length, and the fitted
    law as a CSV."""
    task, table, fit_table, result = run.config.task, data.table, data.fit_table, data.result
    # The caption's horizon is the Measurement's, the one show_horizon shows above: one computation, said once.
    look_for = dilution_look_for(run, table, result, measured=data.measurement.measured_horizon)
    show.chart_captioned(charts.dilution(table, fit_table, 1 / task.vocab_size), look_for, table, "dilution", run.run_id)
    status = data.measurement.prediction_status
    if (trust := prediction_captions.status_caption(status)) is not None:
        (st.caption if status.trusted else st.warning)(trust)
    show.chart_captioned(charts.inverse_mass(table, fit_table),
                         readouts.inverse_mass_caption(lengths, table["target_mass"], task.train_length, result),
                         table[["length", "samples", "target_mass", "target_mass_sem", "predicted_mass"]]
                         .assign(inverse_mass=1 / table["target_mass"]), "inverse-mass", run.run_id)
    if fit_table is not None:
        fit = result.fit
        law = fit_table.assign(m_out=fit.m_out, m_out_low=fit.m_out_low, m_out_high=fit.m_out_high,
                               m_out_lengths_low=fit.quoted_low, m_out_lengths_high=fit.quoted_high,
                               plain_m_out=fit.plain_law.m_out, samples=samples)
        st.download_button("Download the fitted law (CSV)", widgets.keyed(law, run.run_id).to_csv(index=False).encode(),
                           widgets.csv_name("fitted-law", run.run_id), "text/csv",
                           help="The fitted p on a grid from the training length to the longest measured length "
                                "(where it was fitted), with m_out and the samples per length it was fitted from.")


def rules(run: Run, lengths: tuple[int, ...], samples: int) -> None:
    """The run under the inference rules, at the page's lengths up to where the rules are read."""
    ruled = rule_lengths(lengths)
    if (note := rule_note(lengths, ruled)) is not None:
        show.caption(note, "Why not every length")
    rules_view.dilution_rules(run, ruled, samples)
