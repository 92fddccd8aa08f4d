"""evacore: a self-hosted LLM conversation core."""

__version__ = "0.1.0"
