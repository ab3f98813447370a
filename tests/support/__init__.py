"""Helpers shared by the unit, integration and e2e tests."""
