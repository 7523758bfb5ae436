"""The accuracy bar: one number for every rule that reads "accuracy near 1".

A run has *learned* its task when its accuracy at the training length is at least ACCURACY_BAR
(lengen_core.analysis.verdict); its *horizon* is the largest length at which accuracy stays at least
ACCURACY_BAR (lengen_core.analysis.horizon). The CLI, the sweeps and every caption and help text of
the app format it from here, so changing it here changes every one of them.
"""

ACCURACY_BAR = 0.9
