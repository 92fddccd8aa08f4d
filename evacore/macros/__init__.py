"""Macro engine (R2.2): SillyTavern's `{{…}}` macros, evaluated left to right, inside-out.

Must not: import the pipeline; stages call `MacroEngine.evaluate` with a filled `MacroEnv`.
"""

from evacore.macros.engine import MacroCall, MacroDef, MacroEngine
from evacore.macros.env import MacroEnv

__all__ = ["MacroCall", "MacroDef", "MacroEngine", "MacroEnv"]
