"""The Theory page's live parts: the equivariance check and the optimisation experiment, with their charts."""
