"""The HTTP server: FastAPI app factory, auth, one router per resource (R8)."""
