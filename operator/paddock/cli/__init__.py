"""The ``paddock`` command (also installed as ``kubectl-paddock``, a kubectl plugin): a thin face
over ``paddock.client`` and the operator's own entry points."""
