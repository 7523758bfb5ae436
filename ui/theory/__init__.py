"""The Theory page's parts: its tabs (sections), the equivariance check and the optimisation experiment, with their charts."""
