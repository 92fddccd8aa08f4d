"""Interchange formats: character cards (PNG/JSON/CHARX), presets, SillyTavern chats, World Info.

Must not: re-export submodules here (import `evacore.formats.cards` etc. directly), touch a
database or HTTP.
"""
