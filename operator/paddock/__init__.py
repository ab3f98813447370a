"""Paddock: run AI coding agents in prepared, isolated sandbox pods on Kubernetes."""

GROUP = "paddock.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

__version__ = "0.1.0"
