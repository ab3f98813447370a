"""``paddock console``: the web console, a face over ``paddock.client`` for people at a
browser: runs live, a run's timeline, approvals to decide, sandboxes and pools."""
