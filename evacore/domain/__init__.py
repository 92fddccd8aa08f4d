"""Plain records and helpers shared by every layer (ids, times, roles).

Must not: do I/O or import other evacore packages.
"""
