"""Channels: adapters from outside protocols onto the core's one door (`core.tours.start`).

Each channel turns its protocol into a `TourRequest` and the tour's events back into its
protocol. Must not: run stages or reach into the pipeline's internals.
"""
