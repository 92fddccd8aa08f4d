"""The prompt a tour builds: ordered elements with stable ids, and the change log of who changed what.

Must not: know stages, plugins or providers; the pipeline and the plugin dispatcher both use it.
"""
