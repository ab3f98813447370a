"""The AgentRun service: which sandbox a run uses, launching its harness, following its
journal into the log, and ending it. ``sandbox.py`` and ``decide.py`` decide (pure);
``execution.py`` does (the API and exec calls)."""
