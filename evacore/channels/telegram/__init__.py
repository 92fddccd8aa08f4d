"""The Telegram channel (SPEC R9.1, R14.2): a bot that talks to the core through its one door.

Modules: `text` (reply tail, Markdown → entities, splitting), `api` (the Bot API client with
retries), `identity` (roles from Telegram user ids), `binding` (one chat per Telegram chat),
`incoming` (a message as the model sees it), `outbox` (saved answers delivered once),
`delivery` (typing and drafts while a tour runs), `polling` (getUpdates under a lease),
`webhook` (the route), `reactions` (Telegram's reaction emoji), `channel` (all of it).
Must not: run stages or reach into the pipeline; every tour starts through `core.tours.start`.
"""
