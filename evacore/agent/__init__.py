"""The agent loop's parts: the step loop, the tool registry and the built-in tools (R5).

Must not: re-export or import its submodules here; import them by their module path.
"""
