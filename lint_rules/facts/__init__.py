"""Facts: what one file says, as plain data (``model``), from one parse and one traversal
(``extract``: ``traversal`` + one collector per concern), stored as JSON (``codec``).

Nothing is imported here: reading cached facts (``model``, ``codec``) must not load LibCST, whose
import alone costs more than a warm run's whole analysis.
"""
