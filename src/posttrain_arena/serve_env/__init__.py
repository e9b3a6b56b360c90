"""Contributed task packages served as OpenEnv environments (`arena task serve`).

It sits beside `distributed/`: above `trial/` (an episode is a trial run by the
TrialRunner) and below `cli/`; nothing in the lower layers imports it.
"""
