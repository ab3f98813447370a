"""What a person's client does with Paddock (build and start a run, exec, decide approvals,
follow a log, list and read sandboxes and runs), for each face over it: the ``paddock``
command, the MCP server and the web console. Each operation is checked for the caller first
(``access.Caller``) and returns plain data."""
