"""The results as one markdown table per part (printed, and written to latest.md)."""

from __future__ import annotations

GB = 1e9


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


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines + [""]


def _status(targets: dict, key: str) -> str:
    target = targets.get(key)
    if not target:
        return ""
    mark = {"met": "**met**", "missed": "**missed**"}.get(target["status"], target["status"])
    return f"{target['target']}: {mark}"


def render(results: dict) -> str:
    meta, targets = results["meta"], results.get("targets", {})
    out = [f"# lengen benchmark ({meta['date']}, commit {meta.get('commit')})", ""]
    m, v = meta["machine"], meta["versions"]
    peer_v = meta.get("peer_versions") or {}
    out += [(f"Machine: {m['cpu_count']} cores ({m.get('cpu_model')}), torch threads {m['torch_threads']}, "
            f"load average (1, 5, 15 min) at start {_loads(m.get('load_average_at_start'))}, "
            f"at end {_loads(meta.get('load_average_at_end'))}: on a shared machine, others' work slows every figure. Python {v['python']}, torch {v['torch']}; "
            f"peer: torch {peer_v.get('torch', '—')}, transformer_lens {peer_v.get('transformer_lens', '—')}. "
            f"Settings: {'quick' if meta['settings']['quick'] else 'default'}; total {meta.get('duration_seconds', 0):.0f} s."),
            "", meta.get("note", ""), ""]

    for encoding, part in results.get("training", {}).items():
        lengen, peer = part["lengen"], part.get("peer") or {}
        out += [f"## Training ({encoding}; median of {len(lengen['runs'])} seeds, {lengen['runs'][0]['steps']} steps)", ""]
        out += _table(["figure", "lengen", "peer (TransformerLens)", "lengen / peer", "target"], [
            ["steps/s", _f(lengen["steps_per_second"], 1), _f(peer.get("steps_per_second"), 1),
             _f(part.get("speedup"), 2, "×"), _status(targets, "training_speedup") if encoding == "rope" else ""],
            ["steps to 99%", _f(lengen["steps_to_target"], 0), _f(peer.get("steps_to_target"), 0), "", ""],
            ["seconds to 99%", _f(lengen["seconds_to_target"]), _f(peer.get("seconds_to_target")), "", ""],
            ["reached 99%", lengen["reached_target"], peer.get("reached_target", "—"), "", ""],
        ])
        if part.get("peer_error"):
            out += [f"Peer: {part['peer_error']}", ""]

    for encoding, part in results.get("evaluation", {}).items():
        out += [f"## Evaluation, 256 sequences per length ({encoding})", ""]
        peer_rows = {r["length"]: r for r in part.get("peer", [])}
        rows = []
        for row in part["lengen"]:
            p = peer_rows.get(row["length"], {})
            rows.append([str(row["length"]), _f(row["seconds"], 3), _f(p.get("seconds"), 3),
                         _f(p["seconds"] / row["seconds"] if p else None, 1, "×"),
                         f"{row['accuracy']:.3f} / {row['target_mass']:.4f}",
                         f"{p['accuracy']:.3f} / {p['target_mass']:.4f}" if p else "—"])
        rows.append(["total", _f(part["lengen_total_seconds"], 3), _f(part.get("peer_total_seconds"), 3),
                     _f(part.get("speedup_total"), 1, "×"), _status(targets, "evaluation_speedup") if encoding == "rope" else "", ""])
        out += _table(["length", "lengen s", "peer s", "speedup", "lengen acc / mass", "peer acc / mass"], rows)
        if part.get("peer_error"):
            out += [f"Peer: {part['peer_error']}", ""]

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
        out += [f"- {_status(targets, 'evaluation_2^20_seconds')}", f"- {_status(targets, 'evaluation_2^20_peak_gb')}", ""]

    if results.get("prediction"):
        pred = results["prediction"]
        out += ["## Prediction (carrier law, 20 geometric lengths up to the longest)", "",
                (f"{len(pred['lengths'])} lengths {pred['lengths'][0]}…{pred['lengths'][-1]}: "
                f"{_f(pred['seconds'], 3)} s (median of {len(pred['runs'])}). {_status(targets, 'prediction_seconds')}"), ""]

    if results.get("app"):
        app = results["app"]
        repeats = app.get("repeats", 1)
        out += [f"## The app (Playwright, headless chromium, cold server; medians of {repeats})", ""]

        def runs(key: str) -> str:
            return ", ".join(_f(v, 2) for v in app.get(f"{key}_runs", []))

        rows = [[label, _f(app.get(key), 2), runs(key), _status(targets, target)] for label, key, target in (
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

    out += ["## Targets", ""]
    out += _table(["target", "value", "status"],
                  [[t["target"], _f(t["value"], 2), t["status"]] for t in targets.values()])
    return "\n".join(out)
