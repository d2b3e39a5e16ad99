"""Rematerialisation: checkpoint/remat, residual reports, checkpointed loops and their strategies."""
