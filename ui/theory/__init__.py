"""The Theory page's parts: its tabs (sections), the live equivariance check (whose arithmetic is the science's,
lengen_core.analysis.equivariance) and the optimisation experiment, with their charts."""
