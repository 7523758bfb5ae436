"""The accuracy bar: one number for every rule that reads "accuracy near 1".

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
