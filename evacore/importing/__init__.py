"""Import and export service shared by the HTTP API and the CLI: cards, lorebooks, presets and
SillyTavern chats into database rows and back.

Must not: parse file bytes itself (evacore.formats does) or print (the CLI does).

Modules: `characters` (card ⇄ character rows + linked lorebook, stored with
`evacore.store.lorebooks`), `chats` (StChat ⇄ chat/messages/variants), `presets` (validate + store), `upload`
(read an HTTP upload with a size cap), `detect` (kind of a file by content), `batch`
(import many files), `export` (write everything of a kind to a folder).
"""
