"""The OpenAI-compatible facade (SPEC R8.7, R14.1): `GET /v1/models` and
`POST /v1/chat/completions` for existing OpenAI clients, onto the core's one door.

Modules: `errors` (OpenAI's error envelope), `models` (model ids → character and connection),
`conversation` (the request body and its messages), `binding` (which chat a conversation is),
`chunks` (tour events → completion chunks), `routes` (the router the server mounts).
Must not: run stages or reach into the pipeline; every tour starts through `core.tours.start`.
"""
