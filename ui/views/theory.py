"""The Theory page's section bodies, one function per tab (ui.theory.sections draws the tabs): the derivations of
the carrier and the dilution law, the optimisation experiment (C1), the RASP-L view (C9), the glossary and the lab's
science document; the live check (C3) is ui.theory.live_check's."""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from lengen.presets import science_document
from ui.glossary import GLOSSARY_ANCHOR, glossary
from ui.theory import gradients as optimisation
from ui.theory.live_check import live_check


def derivations() -> None:
    """Sections 1–3: the RoPE logit depends on the offset alone, the carrier and its rank, the dilution law."""
    st.header("1. The RoPE logit depends on the offset alone (C3)")
    st.markdown(r"Write each rotated pair of features $(x_j, x_{j+D/2})$ as one complex number $z_j$. RoPE turns "
                r"the query of token $a$ at position $t$ into $q_j(a)\,e^{i\omega_j t}$ and the key of token $b$ at "
                r"$u$ into $k_j(b)\,e^{i\omega_j u}$, with $\omega_j = \text{base}^{-2j/D}$. The logit is")
    st.latex(r"\ell_{ab}(t,u) = \frac{1}{\sqrt D}\sum_j \operatorname{Re}\!\left[q_j(a)\,e^{i\omega_j t}\;"
             r"\overline{k_j(b)\,e^{i\omega_j u}}\right] = \frac{1}{\sqrt D}\sum_j \operatorname{Re}\!\left["
             r"q_j(a)\,\overline{k_j(b)}\,e^{i\omega_j (t-u)}\right] = s_{ab}(\Delta),\qquad \Delta = t-u.")
    st.markdown(r"The absolute positions cancel: shifting both by $s$ leaves every logit unchanged, at any $s$. "
                r"A learned table instead adds rows $P_t$, $P_u$ before the projections, and rows never reached "
                r"in training keep their initial values, so nothing ties $\ell(t+s, u+s)$ to $\ell(t,u)$.")

    st.header("2. The carrier and its low rank (C5)")
    st.latex(r"s(\Delta) = \frac{1}{V^2}\sum_{a,b} s_{ab}(\Delta) = \sum_j A_j \cos(\omega_j \Delta + \varphi_j),"
             r"\qquad A_j e^{i\varphi_j} = \frac{1}{V^2\sqrt D}\sum_{a,b} q_j(a)\,\overline{k_j(b)}.")
    st.markdown(r"Each cosine is a sum of two exponentials, $\cos(\omega(t-u)+\varphi) = \operatorname{Re}"
                r"[e^{i\varphi}e^{i\omega t}e^{-i\omega u}]$, so the positional logit matrix "
                r"$S_{tu} = s(t-u)$ is Toeplitz and has")
    st.latex(r"\operatorname{rank} S \le 2\cdot\#\{j : A_j \ne 0\}.")
    st.markdown(r"Training makes $s$ peak at the target offset $k$ inside the training range: the **carrier** "
                r"is the learned selector, and because it is a function of $\Delta$ it exists at every length.")

    st.header("3. The dilution law (C6)")
    st.markdown(r"Softmax over $n$ keys gives the target the mass")
    st.latex(r"p(n) = \frac{e^{s(k)}}{\sum_{\Delta=0}^{n-1} e^{s(\Delta)}}.")
    st.markdown(r"**Uniform floor.** Off-target logits at $b$, the target at $b+m$:")
    st.latex(r"p(n) = \frac{1}{1 + (n-1)\,e^{-m}}.")
    st.markdown(r"**Two zones.** Inside the training range the carrier is whatever training made it; beyond, "
                r"each extra key adds about $e^{-m_\text{out}}$ relative to the target, so $1/p$ is linear in length:")
    st.latex(r"\frac{1}{p(n)} = \frac{1}{p(L_\text{train})} + (n - L_\text{train})\,e^{-m_\text{out}}.")
    st.markdown(r"**The vote model.** With an ideal readout each token's score is the attention mass on the keys "
                r"holding it. The answer is right while $p > 1/2$; beyond, with many off-target keys,")
    st.latex(r"A(n) \approx \int \varphi(z)\,\Phi(z + c)^{V-1}\,dz,\qquad c = e^{m}\sqrt{\frac{V}{n-1}},")
    st.markdown(r"which falls to chance $1/V$ as $n$ grows. The Dilution page fits the two-zone law to measured "
                r"points, with $n - L_\text{train}$ replaced by $K(n)$, the far keys counted by the weight the trained "
                r"carrier gives them (keys at some distances weigh more than others), and draws the prediction made "
                r"from the weights alone.")


def optimisation_experiment() -> None:
    """Section 5: can a learned table hold the rule, and does training find it (C1)?"""
    st.header("5. Can learned positions express the rule, and does training find it? (C1)")
    st.markdown(r"A learned table can hold the carrier: rows $P_t = (\cos\omega_j t, \sin\omega_j t)_j$ at RoPE's "
                r"frequencies, a query that turns each pair back by $\omega_j k$ and position-only keys give the logit "
                r"$A\sum_j\cos(\omega_j(t-u-k))$, largest at $u = t-k$ at every length the table has "
                r"(`python -m lengen construct`). Below: that head, the Learned (APE) preset trained from a random "
                r"start with the same config, the gradient its training gives each row, and training started from the "
                r"built head.")
    optimisation.reach()
    random_start = optimisation.gradients()
    optimisation.drift(random_start)


def rasp_l() -> None:
    """Section 6: the shift task as a RASP-L program (C9)."""
    st.header("6. The RASP-L view (C9)")
    st.markdown("RASP-L's conjecture: a transformer length-generalises on tasks with a short program that does "
                "not depend on the length. The shift task is one line of it:")
    st.code("def shift_right(x, k):  # every query t reads the token at key t − k\n"
            "    return aggregate(select(indices(x), indices(x), lambda key, query: key == query - k), x)",
            language="python")
    st.markdown(r"The selector `key == query - k` is a predicate of $t - u$ alone. RoPE can express it only through "
                r"$s_{ab}(\Delta)$, so the weights gradient descent finds for it are a carrier peaking at "
                r"$\Delta = k$, and the equivariance of section 1 makes that one selector valid at every length. A learned "
                r"table can fit the same training data with a selector on absolute positions, and on the paper's "
                r"account that is the solution gradient descent picks there; it says nothing about positions it "
                r"never saw.")


def glossary_section() -> None:
    """Section 7: every term the pages use, in plain words."""
    st.header("7. Glossary", anchor=GLOSSARY_ANCHOR)
    st.markdown("Every term the pages use, in plain words; the links on every page jump to these entries.")
    glossary()


def science() -> None:
    """Section 8: docs/science.md, whole."""
    st.header("8. The lab's science document")
    st.markdown("Everything on these pages in one place, with what each readout means and does **not** mean, the "
                "verdict on every run, the fitted law and the prediction: `docs/science.md` in the lab's repository, "
                "shown here in full.")
    st.markdown(science_document())


SECTION_BODIES = {"derivations": derivations, "live-check": live_check, "optimisation": optimisation_experiment,
                  "rasp-l": rasp_l, "glossary": glossary_section, "science": science}


def section(name: str, tab: DeltaGenerator) -> None:
    """The section `name` (a key of ui.theory.sections.SECTIONS), drawn in its tab."""
    with tab:
        SECTION_BODIES[name]()
