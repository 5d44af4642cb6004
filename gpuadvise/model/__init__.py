"""Pure models: no I/O, no printing; each returns a result dataclass."""
