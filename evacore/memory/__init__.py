"""Memory (R2.5): memory blocks bound to a chat, character or user, and retrieval of past
messages and data-bank documents (lexical always, vectors optional).

Must not: import the core or the pipeline; the memory stage (pipeline/stages/memory.py) and
the memory tools (agent/tools/memory.py) use this package.
"""
