"""The results as one markdown table per part (printed, and written to latest.md)."""

from __future__ import annotations

from bench.common import GB, TARGETS


def _f(value, digits: int = 2, unit: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if abs(value) >= 100:
        return f"{value:,.0f}{unit}"
    return f"{value:.{digits}f}{unit}"


def _loads(values) -> str:
    return "—" if not values else " ".join(f"{v:.1f}" for v in values)


def _to_target(side: dict) -> str:
    if side.get("seconds_to_target") is None:
        return f"not reached ({side.get('reached_target', '—')})"
    return f"{side['seconds_to_target']:.2f} s ({side['steps_to_target']:.0f}, {side['reached_target']})"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines + [""]


def _value(value, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "GB":
        return f"{value:.2f} GB"
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "steps/s":
        return f"{value:,.0f} steps/s"
    return f"{value:.2g}"


def _checked(row: dict) -> str:
    """The value a target is checked on: a ratio (×) or lengen's own figure."""
    if row["value"] is None:
        return "—"
    if row["ratio"]:
        return f"{row['value']:.2f}× ({row['ratio']})" if row["value"] < 100 else f"{row['value']:,.0f}× ({row['ratio']})"
    return _value(row["value"], row["unit"])


def targets_table(rows: list[dict]) -> list[str]:
    """figure | lengen | peer | target | checked | status, notes below."""
    lines = _table(["figure", "lengen", "peer (TransformerLens)", "target", "checked value", "status"], [
        [row["figure"], _value(row["lengen"], row["unit"]) if row["unit"] else "—", _value(row["peer"], row["unit"]),
         f"{row['target']} (issue {row['issue']})", _checked(row),
         {"met": "**met**", "missed": "**missed**"}.get(row["status"], row["status"])] for row in rows])
    notes = [f"- {row['figure']}: {row['note']}" for row in rows if row.get("note")]
    counts = {status: sum(row["status"] == status for row in rows) for status in ("met", "missed", "not measured")}
    if (beside := sum(row["status"].startswith("reported") for row in rows)):
        counts["reported beside them"] = beside
    summary = [", ".join(f"{n} {status}" for status, n in counts.items()) + ".", ""] if rows else []
    return lines + (notes + [""] if notes else []) + summary


def _app_status(rows: list[dict], key: str) -> str:
    """The status of an app figure's target in the targets table (its figure's words), or "" where it has none."""
    if not key:
        return ""
    words = TARGETS[key].figure
    return next((row["status"] for row in rows if row["figure"] == words), "not measured")


def render(results: dict) -> str:
    meta, targets = results["meta"], results.get("targets", [])
    out = [f"# lengen benchmark ({meta['date']}, commit {meta.get('commit')})", ""]
    m, v = meta["machine"], meta["versions"]
    peer_v = meta.get("peer_versions") or {}
    out += [(f"Machine: {m['cpu_count']} cores ({m.get('cpu_model')}), torch threads {m['torch_threads']}, "
            f"load average (1, 5, 15 min) at start {_loads(m.get('load_average_at_start'))}, "
            f"at end {_loads(meta.get('load_average_at_end'))}: on a shared machine, others' work slows every figure. Python {v['python']}, torch {v['torch']}; "
            f"peer: torch {peer_v.get('torch', '—')}, transformer_lens {peer_v.get('transformer_lens', '—')}. "
            f"Settings: {'quick' if meta['settings']['quick'] else 'default'}, parts {' '.join(meta['settings']['parts'])}; "
            f"total {meta.get('duration_seconds', 0):.0f} s."),
            "", meta.get("note", ""), ""]
    out += ["## Every figure beside its target and the peer", ""] + targets_table(targets)

    if results.get("training"):
        settings = meta["settings"]
        out += [(f"## Training (median of {settings['runs']} seeds × {settings['steps']} steps; each width beside the "
                "peer built as wide)"), ""]
        rows = []
        for encoding, widths in results["training"].items():
            for width, part in widths.items():
                lengen, peer = part["lengen"], part.get("peer") or {}
                rows.append([encoding, width, _f(lengen["steps_per_second"], 1), _f(peer.get("steps_per_second"), 1),
                             _f(part.get("speedup"), 2, "×"), _to_target(lengen), _to_target(peer) if peer else "—",
                             f"{_loads(part.get('load_average_before'))} → {_loads(part.get('load_average_after'))}"])
        out += _table(["encoding", "d_model", "lengen steps/s", "peer steps/s", "lengen / peer",
                       "lengen to 99%: s (steps, runs there)", "peer to 99%", "load average before → after"], rows)
        errors = {part.get("peer_error") for widths in results["training"].values() for part in widths.values()} - {None}
        out += [f"Peer: {error}" for error in errors] + ([""] if errors else [])

    for encoding, part in results.get("evaluation", {}).items():
        out += [(f"## Evaluation, {meta['settings']['samples']} sequences per length ({encoding}, d_model "
                f"{part.get('d_model')})"), ""]
        peer_rows = {r["length"]: r for r in part.get("peer", [])}
        rows = []
        for row in part["lengen"]:
            p = peer_rows.get(row["length"], {})
            rows.append([str(row["length"]), _f(row["seconds"], 3), _f(p.get("seconds"), 3),
                         _f(p["seconds"] / row["seconds"] if p else None, 1, "×"),
                         f"{row['accuracy']:.3f} / {row['target_mass']:.4f}",
                         f"{p['accuracy']:.3f} / {p['target_mass']:.4f}" if p else "—"])
        rows.append(["total", _f(part["lengen_total_seconds"], 3), _f(part.get("peer_total_seconds"), 3),
                     _f(part.get("speedup_total"), 1, "×"), "", ""])
        out += _table(["length", "lengen s", "peer s", "speedup", "lengen acc / mass", "peer acc / mass"], rows)
        if part.get("peer_error"):
            out += [f"Peer: {part['peer_error']}", ""]

    issue = results.get("evaluation_issue")
    if issue:
        length = issue.get("length") or 0
        shown = f"2^{length.bit_length() - 1}" if length and length & (length - 1) == 0 else str(length)
        out += [f"## Evaluation at {shown} × {issue.get('samples')} (RoPE; fresh processes, taking turns)", ""]
        if issue.get("error"):
            out += [f"Not measured: {issue['error']}", ""]
        else:
            rows = []
            for label, part in (("core `evaluate` (bench.probe: the call alone)", issue["core"]),
                                ("`python -m lengen evaluate RUN --lengths … --samples … --json`: launch to exit",
                                 issue["command"]),
                                ("`python -m lengen runs --json`: any command's start", issue["command_startup"])):
                if "error" in part:
                    rows.append([label, "error: " + part["error"][:120], "", "", ""])
                    continue
                acc = (f"{part['accuracy']:.4f} / {part['target_mass']:.6f}" if "accuracy" in part else "")
                rows.append([label, _f(part["seconds"], 2), " ".join(f"{x:.2f}" for x in part["runs_seconds"]),
                             _f(part["peak_rss_bytes"] / GB, 2), acc])
            out += _table(["what", "median s", "runs s", "peak memory GB", "accuracy / target mass"], rows)
            command = issue["command"]
            if "error" not in command:
                out += [f"The command's predicted horizon: {command.get('predicted_horizon')}"
                        + (f" ({command['predicted_horizon_note']})" if command.get("predicted_horizon_note") else "")
                        + f"; the run: `{issue['run_id']}`, made by `python -m lengen train`.", ""]

    if results.get("evaluation_long"):
        out += ["## Evaluation at long lengths (lengen alone, RoPE, fresh process per length)", ""]
        rows = []
        for row in results["evaluation_long"]:
            if "error" in row:
                rows.append([str(row["length"]), "error", row["error"][:80], "", "", ""])
                continue
            rows.append([f"2^{row['length'].bit_length() - 1}", _f(row["seconds"], 2), _f(row["peak_rss_bytes"] / GB, 2),
                         _f(row["baseline_rss_bytes"] / GB, 2), f"{row['accuracy']:.3f} / {row['target_mass']:.5f}",
                         str(row.get("repeats", 1))])
        out += _table(["length", "seconds", "peak RSS GB", "RSS before eval GB", "acc / mass", "runs"], rows)

    if results.get("prediction"):
        pred = results["prediction"]
        out += ["## Prediction (carrier law, 20 geometric lengths up to the longest)", "",
                (f"{len(pred['lengths'])} lengths {pred['lengths'][0]}…{pred['lengths'][-1]}: "
                f"{_f(pred['seconds'], 3)} s (median of {len(pred['runs'])})"
                 + (f"; CPU time {_f(pred['cpu_seconds'], 3)} s." if pred.get("cpu_seconds") is not None else ".")), ""]

    if results.get("app"):
        app = results["app"]
        repeats = app.get("repeats", 1)
        out += [f"## The app (Playwright, headless chromium, cold server; medians of {repeats})", ""]

        def runs(key: str) -> str:
            return ", ".join(_f(v, 2) for v in app.get(f"{key}_runs", []))

        rows = [[label, _f(app.get(key), 2), runs(key), _app_status(targets, target)] for label, key, target in (
            ("streamlit run → Start page drawn", "start_seconds", "app_start_seconds"),
            ("  of which: server healthy", "server_healthy_seconds", ""),
            ("preset click → Dilution charts drawn", "preset_dilution_seconds", "app_preset_dilution_seconds"),
            ("  of which: the preset's rerun", "preset_click_seconds", ""),
            ("  of which: Dilution page (cold)", "dilution_open_seconds", ""),
            ("slowest page switch, run selected (cold)", "page_switch_seconds", "app_page_switch_seconds"),
            ("  Dilution → Attention (cold)", "switch_attention_cold_seconds", ""),
            ("  Dilution → Carrier (cold)", "switch_carrier_cold_seconds", ""),
            ("  Dilution → Compare (cold)", "switch_compare_cold_seconds", ""),
            ("  Dilution → Transformer (cold)", "switch_transformer_cold_seconds", ""),
            ("  Dilution → Theory (cold)", "switch_theory_cold_seconds", ""),
            ("  Theory → its Live check tab (cold)", "theory_tab_live_check_seconds", ""),
            ("  Theory → its Learned positions tab (cold)", "theory_tab_optimisation_seconds", ""),
            ("  Theory → its Glossary tab (cold)", "theory_tab_glossary_seconds", ""),
            ("  Dilution → Train (cold)", "switch_train_cold_seconds", ""),
            ("  back to Dilution (warm)", "switch_dilution_warm_seconds", ""),
            ("Train click → first progress text", "first_progress_text_seconds", ""),
            ("Train click → first live chart", "first_live_update_seconds", "app_first_live_update_seconds"),
        )]
        out += _table(["figure", "median s", "each pass, s", "target"], rows)
        if app.get("error"):
            out += [f"App: {app['error']}", ""]

    scaling = results.get("scaling", {})
    if scaling.get("evaluation"):
        out += ["## Scaling: evaluation vs length (fresh process each; log-log slopes between rows)", ""]
        rows = [[f"2^{r['length'].bit_length() - 1}", _f(r.get("seconds"), 3), _f(r.get("seconds_slope"), 2),
                 _f(r["peak_rss_bytes"] / GB if r.get("peak_rss_bytes") else None, 3),
                 _f((r["peak_rss_bytes"] - r["baseline_rss_bytes"]) / GB if r.get("peak_rss_bytes") else None, 3)]
                for r in scaling["evaluation"]]
        out += _table(["length", "seconds", "slope", "peak RSS GB", "peak − before eval GB"], rows)
    if scaling.get("training"):
        out += ["## Scaling: training", ""]
        rows = [[f"d_model {r['d_model']}", _f(r["steps_per_second"], 1), _f(r["ms_per_step"], 2)]
                for r in scaling["training"]["d_model"]]
        rows += [[f"L_train {r['train_length']}", _f(r["steps_per_second"], 1), _f(r["ms_per_step"], 2)]
                 for r in scaling["training"]["train_length"]]
        out += _table(["config", "steps/s", "ms/step"], rows)

    for name, prof in results.get("profiles", {}).items():
        if "top_by_own_time" not in prof:
            continue
        out += [f"## Profile: {name} (top functions by own time; full text in {prof['text']})", ""]
        rows = [[r["function"], str(r["calls"]), _f(r["tottime"], 3), _f(r["cumtime"], 3),
                 _f(100 * r["share"] if r["share"] is not None else None, 1, "%")] for r in prof["top_by_own_time"][:10]]
        out += _table(["function", "calls", "own s", "cumulative s", "share"], rows)

    return "\n".join(out)
