"""The terminal channel: `evacore chat` and `evacore client` (R14.3), clients of the HTTP API.

Must not: run tours itself; every tour goes through `POST /v1/chats/{id}/generate`, remote or
served in-process from the local data dir (the CLI's embedded mode).
"""
