"""Trajectories out: evaluation and training episodes as TRL-ready SFT rows."""
