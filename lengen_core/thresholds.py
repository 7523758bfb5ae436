"""The thresholds: one number for every rule a reader sees ("accuracy near 1", "the prediction agrees").

A run has *learned* its task when its accuracy at the training length is at least ACCURACY_BAR
(lengen_core.analysis.verdict); its *horizon* is the largest length at which accuracy stays at least
ACCURACY_BAR (lengen_core.analysis.horizon). The CLI, the sweeps and every caption and help text of
the app format it from here, so changing it here changes every one of them.
"""

ACCURACY_BAR = 0.9

# A step: accuracy changing by more than this between two neighbouring measured lengths. The captions name
# each one (with the carrier's near-recurrence in between, where there is one) instead of calling the decay
# gradual (C6).
ACCURACY_STEP = 0.1

# The prediction from the weights agrees with a measurement when it misses it by at most this: its accuracy
# beyond the measured 95% interval, its target mass beyond two standard errors of the measured mean
# (lengen_core.analysis.trust). It is the bound the prediction panel holds every trained run to
# (docs/prediction.md, tests/unit/test_prediction_panel.py), so a miss beyond it is one the panel would fail.
PREDICTION_BOUND = 0.05

# Half accuracy: where the captions say accuracy "falls below half" on its way to chance.
ACCURACY_HALF = 0.5

# Chance: a run is "at chance" past its training length when its accuracy's 95% interval reaches within this
# of 1/V (lengen_core.analysis.verdict).
CHANCE_TOLERANCE = 0.02

# A frequency of the carrier's spectrum is "active" when its amplitude is at least this share of the largest
# (lengen_core.analysis.carrier).
ACTIVE_AMPLITUDE = 0.01

# The dilution law "describes" a run when every fitted point is within this share of the measured p
# (lengen_core.analysis.fit).
LAW_TOLERANCE = 0.10
