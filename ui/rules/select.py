"""The inference-rule selector shared by Dilution, Compare, Carrier and Attention, and its link.

A rule (lengen_core.analysis.rules) is chosen by name; a rule with a parameter (ssmax's s, the scale of yarn,
pi, ntk and ntk-by-parts, dynamic's factor, longrope's table) gets a box beside it, blank meaning its default
(L / L_train for a scale). Only the rules
defined for the run are offered; each one that is not is named with the core's one-line reason, so
nothing is hidden without a word. The link writes the choice as `rules=log-n,ntk:4`; a link value
that is not a rule, has a bad parameter or is not defined here is a warning of its own and is dropped,
and everything else (the other rules, every other setting) is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import streamlit as st

from lengen_core.analysis.rules import (
    MAX_TABLE_CHARACTERS,
    RULES,
    InferenceRule,
    RuleError,
    make_rule,
    parse_rule,
    rule_with_parameter,
)
from lengen_core.config import RunConfig
from ui.state import new_link_values, plain, show_view
from ui.widgets import document

LINK_NAME = "rules"
MAX_LINK_CHARACTERS = 200 + MAX_TABLE_CHARACTERS  # every rule with a parameter and a longrope table written out
# in full; keeps hostile input out of messages
OFFERED = tuple(name for name in RULES if name != "none")  # none is the unmodified run, always drawn
RULES_DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "rules.md"
# What each rule does and when it helps, in one sentence a student reads; docs/rules.md's table "In a
# sentence" holds the same words (tests/app/test_rule_selector.py checks they agree).
EXPLANATIONS = {
    "log-n": "Sharpens every logit by ln n / ln L_train once a query sees more keys than in training, so the "
             "target keeps its lead over the growing crowd of far keys: it helps a softmax run that fades by "
             "dilution.",
    "ssmax": "Sharpens the logits by s·ln n at every length, log-n without its floor at 1 and with a scale s you "
             "choose: it helps where log-n does, and shows what sharpening does inside the training length too.",
    "yarn": "Sharpens the logits by YaRN's temperature (0.1·ln s + 1)², a gentler factor than log-n's: it helps a "
            "softmax run that fades by dilution, less than log-n.",
    "pi": "Squeezes the positions by L_train / L so a long sequence reuses the positions seen in training: it helps "
          "a model fine-tuned after it, and without that moves this task's target from k to k·L / L_train, so it "
          "fails here.",
    "ntk": "Raises RoPE's base so its slow waves stretch over the test length while the fast ones stay: it helps "
           "a run that must read far offsets, and costs a little margin on a near offset like this task's k.",
    "dynamic": "Raises RoPE's base as the sequence grows, by α = f·L/L_train − (f − 1) where ntk uses L/L_train, "
               "and leaves the training length alone: it helps a run that must read far offsets, as ntk does, and "
               "stretches the slow waves further at each length.",
    "ntk-by-parts": "Keeps the pairs that turn many times within the training length, squeezes the slow ones by s "
                    "as pi does, and blends between: it helps a model fine-tuned after it; "
                    "without that, on a short training length most pairs are slow, so it moves this task's target "
                    "much as pi does.",
    "longrope": "Divides each frequency pair by its own factor from a table you edit (D/2 factors, such as 1x32/4x32 "
                "for a 128-wide head), beyond the training length only: it helps where the table stretches only "
                "the slow waves that far offsets need and keeps the fast ones that place a near offset.",
}


def rules_document() -> str:
    """docs/rules.md (shipped in the image), as markdown: what every rule does, and what it did to the presets."""
    try:
        return RULES_DOCUMENT.read_text(encoding="utf-8")
    except OSError:
        return f"The rules document is missing from this installation (expected at `{RULES_DOCUMENT}`)."


def explain(name: str) -> str:
    """'**log-n** (logits × …): Sharpens …' for a rule offered here."""
    return f"**{name}** ({RULES[name].summary}): {EXPLANATIONS[name]}"


def why_undefined(name: str, config: RunConfig) -> str | None:
    """The core's one-line reason `name` is not defined for the run `config`, or None where it is."""
    return why_rule_undefined(make_rule(name), config)


def why_rule_undefined(rule: InferenceRule, config: RunConfig) -> str | None:
    """The same for a rule with its parameter (a longrope table must have one factor per pair of the run)."""
    try:
        rule.check(config)
    except RuleError as error:
        return str(error)
    return None


def _warn(message: str) -> None:
    st.warning(plain(message[:1].upper() + message[1:]), icon=":material/link_off:")


def _from_link(key: str, names: Sequence[str], offered: Sequence[str], first: RunConfig,
               max_rules: int | None) -> None:
    """Start the selector from a new link's `rules`, dropping (with a warning each) what cannot be used."""
    values = new_link_values(LINK_NAME)
    if values is None:
        return
    text = ",".join(values)
    if len(text) > MAX_LINK_CHARACTERS:
        _warn(f"link parameter '{LINK_NAME}' is {len(text)} characters long: at most {MAX_LINK_CHARACTERS}; "
              "the rules shown were kept")
        return
    kept: dict[str, InferenceRule] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            rule = parse_rule(part)
        except RuleError as error:
            _warn(f"link parameter '{LINK_NAME}' has {part!r}: {error}; dropped")
            continue
        if rule.trivial:
            continue  # none: the unmodified run, always drawn
        if rule.name not in names:
            _warn(f"link parameter '{LINK_NAME}' has {part!r}, not a rule this page draws (allowed: "
                  f"{', '.join(names)}); dropped")
        elif rule.name not in offered:
            _warn(f"link parameter '{LINK_NAME}' has {part!r}: {why_undefined(rule.name, first)}; dropped")
        elif rule.name in kept:
            _warn(f"link parameter '{LINK_NAME}' names {rule.name} twice: kept {kept[rule.name].label}, dropped {part}")
        elif max_rules is not None and len(kept) >= max_rules:
            _warn(f"link parameter '{LINK_NAME}' has {part!r}: this page shows {max_rules} rule at a time; dropped")
        else:
            kept[rule.name] = rule
    if kept or all(p.strip() in ("", "none") for p in text.split(",")):  # a link of only bad values changes nothing
        st.session_state[key] = list(kept)
        for name, rule in kept.items():
            st.session_state[f"{key}-{name}"] = rule.param_text


PARAMETER_DEFAULTS = {  # what a blank box means, where it is not the scale L / L_train
    "ssmax": "1 / ln L_train",
    "dynamic": "f = 2; the base still grows with each test length",
    "longrope": "factor 1 for the fast half of the pairs, L / L_train for the slow half",
}


def _parameter_help(name: str) -> str:
    rule = RULES[name]
    default = PARAMETER_DEFAULTS.get(name, "L / L_train at each test length L")
    if name == "longrope":
        return (f"{rule.summary}. Blank: {default}. A table of D/2 factors ({rule.allowed()} each) joined by '/', "
                "such as 1x32/2/4x31 (4x31: the factor 4, 31 times); used beyond the training length.")
    fixed = "sets f at every length" if name == "dynamic" else "fixes it at every length"
    return f"{rule.summary}. Blank: {default}. A number ({rule.allowed()}) {fixed}."


def _explain_undefined(undefined: list[str], configs: dict[str, RunConfig], offered: list[str]) -> None:
    """One line per rule not offered, with the core's reason (the first run's, on Compare)."""
    if not undefined:
        return
    where = "this run" if len(configs) == 1 else "any of these runs"
    first = next(iter(configs.values()))
    head = f"Not defined for {where}" if offered else f"No inference rule here is defined for {where}"
    st.caption(f"{head}:  \n" + "  \n".join(f"**{n}**: {plain(why_undefined(n, first) or 'not defined')}"
                                           for n in undefined))


def rule_selector(key: str, configs: dict[str, RunConfig], names: Sequence[str] = OFFERED,
                  max_rules: int | None = None, label: str = "Inference rules") -> list[InferenceRule]:
    """The rules chosen among `names` that are defined for at least one of `configs` (label → config).

    Each rule of `names` defined for none of them gets a line saying why (from the first run's reason).
    A bad parameter is a warning beside its box; that rule is left out until it is fixed, the rest stay.
    """
    offered = [n for n in names if any(why_undefined(n, c) is None for c in configs.values())]
    _from_link(key, names, offered, next(iter(configs.values())), max_rules)
    st.session_state[key] = [n for n in st.session_state.get(key, []) if n in offered]  # another run: drop the rest
    _explain_undefined([n for n in names if n not in offered], configs, offered)
    if not offered:  # no control that would do nothing
        show_view(LINK_NAME, None)
        return []
    chosen = st.multiselect(
        label, offered, key=key, max_selections=max_rules, format_func=lambda n: f"{n}: {RULES[n].summary}",
        placeholder="Choose rules to read the same weights under",
        help="Each rule changes how the trained weights are read at test time (nothing is retrained) and is "
             "drawn beside the unmodified run (none):\n\n" + "\n".join(f"- {explain(n)}" for n in offered)
             + "\n\nThe whole account, with what each rule did to the presets: *How the rules work* below.",
    )
    for name in chosen:
        st.caption(explain(name))
    document("How the rules work (docs/rules.md)", rules_document, key=f"{key}-document")
    parsed: dict[str, InferenceRule] = {n: make_rule(n) for n in chosen if RULES[n].param_name is None}
    with_parameter = [n for n in chosen if RULES[n].param_name is not None]
    for column, name in zip(st.columns(len(with_parameter)) if with_parameter else [], with_parameter, strict=True):
        st.session_state.setdefault(f"{key}-{name}", "")
        text = column.text_input(f"{name} {RULES[name].param_name}", key=f"{key}-{name}", placeholder="blank: default",
                                 help=_parameter_help(name))
        try:
            rule = rule_with_parameter(name, text)
            reasons = [why_rule_undefined(rule, config) for config in configs.values()]
            if all(reasons):  # defined for none of the runs with this parameter
                raise RuleError(reasons[0])
            parsed[name] = rule
        except RuleError as error:
            column.warning(plain(f"{error}. {name} is left out until this is fixed (blank: its default)."),
                           icon=":material/error:")
    rules = [parsed[n] for n in chosen if n in parsed]
    show_view(LINK_NAME, ",".join(r.label for r in rules) or None)
    return rules
