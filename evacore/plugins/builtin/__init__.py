"""Plugins shipped with evacore; discovery loads them first (see discovery.BUILTIN_MODULES).

Must not: reach into the host past the public plugin API; they are written like any plugin.
"""
