"""The generation pipeline: tours, the prompt, the 14 stages and the runner (R2.1)."""
