"""Edit machinery for ``--fix`` / ``--diff``: fixers edit, they never analyse.

``run`` plans and writes; each rule names its fixers (``FIXERS``); ``decorator`` and ``call`` are
FWD001's; ``locate`` finds the nodes to edit by the lines the facts give; ``imports`` adds an import
with the smallest edit; ``verify`` checks the result; ``atomic`` writes it.
"""
