"""What every rule's fix shares: rules edit (``rules/*.fix``), this package runs and checks.

``run`` drives the passes and writes; ``verify`` is the gate every fix passes (the same for every
rule); ``atomic`` writes; ``diff`` prints ``--diff``. The edit toolkit for rules: ``locate`` finds
the nodes to edit by the lines the facts give, ``imports`` adds or removes an import with the
smallest edit, ``registrations`` inserts ``mark_forward_method`` lines after a set-up.
"""
