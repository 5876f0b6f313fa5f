"""Facts: what one file says, as plain data (``model``), from one parse and one traversal
(``extract``: ``traversal`` + one collector per concern), stored as JSON (``codec``).

Nothing is imported here: reading cached facts (``model``, ``codec``) must not load the
collectors, which a warm run never needs.
"""
