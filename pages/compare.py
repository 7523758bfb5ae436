"""Compare: several runs overlaid on the dilution and carrier charts, one colour per run (C1, C6, C7)."""

import pandas as pd
import streamlit as st

from ui import compare_charts
from ui.analyses import comparison
from ui.presets import preset_ids, single_head_presets
from ui.runs import load_run, run_label, stored_run_ids
from ui.widgets import chart

st.title("Compare runs")
st.markdown("RoPE against learned positions against linear attention, or several seeds and offsets of one "
            "recipe: each run keeps its colour on every chart below.")

options = list(dict.fromkeys([*preset_ids().values(), *stored_run_ids()]))
left, middle, right = st.columns([3, 1, 1])
chosen = left.multiselect(
    "Runs", options, default=list(single_head_presets().values()), format_func=run_label,
    help="Presets ship with the app; runs you train on the Train page are added here.",
)
longest = middle.select_slider(
    "Longest test length", [1 << p for p in range(6, 17)], value=1 << 12,
    format_func=lambda n: f"2^{n.bit_length() - 1} = {n:,}",
    help="Lengths double from each run's training length up to this one (transformers stop at 16×, "
         "a learned table at its end).",
)
samples = right.select_slider("Samples per length", [64, 128, 256, 512], value=128,
                              help="Random sequences per length; more samples, less noise, more time.")
if not chosen:
    st.info("Pick at least one run above.")
    st.stop()

labels = {run_id: run_label(run_id).removeprefix("Preset: ") for run_id in chosen}
results = {run_id: comparison(run_id, longest, samples) for run_id in chosen}
configs = {run_id: load_run(run_id).config for run_id in chosen}

curves = pd.concat([
    pd.DataFrame({"run": labels[i], "length": r.lengths, "accuracy": r.accuracy, "target_mass": r.target_mass,
                  "predicted_mass": r.predicted_mass if r.predicted_mass is not None else [None] * len(r.lengths)})
    for i, r in results.items()
], ignore_index=True)
chance = min(1 / c.task.vocab_size for c in configs.values())
chart(compare_charts.accuracy_overlay(curves, chance),
      "RoPE with softmax stays near 1 far past its training length; learned positions and linear attention "
      "fall to the chance line just past it (C1, C7).", curves, "compare-accuracy")
chart(compare_charts.mass_overlay(curves),
      "the weight on the target key decays smoothly with length (dilution, C6); the dashed prediction, made from "
      "the weights alone, should track its solid curve.", curves, "compare-mass")
window = 4 * max(c.task.train_length for c in configs.values())  # Δ shown: up to 4 × the longest training
scaled = st.toggle("Scale each carrier to its peak", value=True,
                   help="On: each carrier minus its mean, divided by its largest |value|, so shapes compare. "
                        "Off: in nats, minus the mean (RoPE's carrier is far larger than the others).")
carriers = pd.concat([
    pd.DataFrame({"run": labels[i], "offset": r.carrier_offsets, "s": r.carrier_values, "source": r.carrier_source})
    .query("offset < @window") for i, r in results.items()
], ignore_index=True)
centred = carriers["s"] - carriers.groupby("run")["s"].transform("mean")
carriers["shown"] = centred / centred.abs().groupby(carriers["run"]).transform("max") if scaled else centred
chart(compare_charts.carrier_overlay(carriers, [c.task.train_length for c in configs.values()],
                                     [c.task.offset for c in configs.values()],
                                     "Carriers s(Δ), each scaled to its peak" if scaled else "Carriers s(Δ), each minus its mean",
                                     "s(Δ) / peak" if scaled else "s(Δ) − mean (nats)"),
      "an aligned carrier peaks at k inside the shaded training range; RoPE's carrier is read from the weights "
      "at every Δ, the others are measured from recorded logits.", carriers, "compare-carriers")

st.subheader("Key numbers")
rows = []
for run_id, result in results.items():
    config = configs[run_id]
    four = dict(zip(result.lengths, result.accuracy, strict=True)).get(4 * config.task.train_length)
    rows.append({
        "run": labels[run_id], "encoding": config.model.encoding, "attention": config.model.attention,
        "layers×heads": f"{config.model.n_layers}×{config.model.n_heads}", "k": config.task.offset,
        "L_train": config.task.train_length, "seed": config.train.seed,
        "accuracy at 4×": four, "Toeplitz": result.toeplitz_fraction,
        "argmax Δ": result.carrier_argmax, "m_out": result.m_out, "carrier": result.carrier_source,
    })
numbers = pd.DataFrame(rows)
st.dataframe(numbers, hide_index=True, width="stretch", column_config={
    "accuracy at 4×": st.column_config.NumberColumn(format="%.2f", help="Accuracy at 4 × the training length."),
    "Toeplitz": st.column_config.NumberColumn(format="%.3f", help="Toeplitz fraction: 1 means the logit depends on "
                                                                  "t − u alone."),
    "m_out": st.column_config.NumberColumn(format="%.2f", help="Fitted effective margin of the dilution law."),
    "argmax Δ": st.column_config.NumberColumn(help="Where the carrier s(Δ) peaks in the training range; k when aligned."),
    "carrier": st.column_config.TextColumn(help="analytic: read from the weights; measured: mean recorded logits."),
})
st.caption("**What to look for:** Toeplitz ≈ 1 and argmax Δ = k for RoPE; a learned table "
           "falls below 1 and its accuracy at 4× is near chance. A layers×heads of 0×1 is the single head.")
st.download_button("Download key numbers (CSV)", numbers.to_csv(index=False).encode(), "compare-numbers.csv",
                   "text/csv", help="The table above, one row per run.")
