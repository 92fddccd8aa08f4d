"""Plain records and helpers shared by every layer: ids, times, roles, and the typed shapes
of the JSON evacore stores and reads back (chat settings, connection params, images).

Must not: do I/O or import other evacore packages.
"""
