"""The stateful services of a running core that meet the database: lorebooks for a tour, the
stream rules' shared rule set and per-tour state.

Must not: import the core, the pipeline or a channel; the core builds these and hands them on.
"""
