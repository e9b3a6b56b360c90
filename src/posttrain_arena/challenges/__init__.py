"""Challenges shipped with the package: generators of suites, collections and base models.

`challenges.micro` is the embedded default: a laptop-scale challenge that `arena demo`
runs end to end.
"""
