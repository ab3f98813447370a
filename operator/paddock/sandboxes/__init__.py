"""Sandbox services: what the Sandbox and Workspace handlers call."""
