"""Delivering a run's work to its git forge: the operator's own git (a bare repository of its
own, which the sandbox's bundle is checked in and pushed from) and the forges' pull-request
APIs. Only the run services use it; nothing here talks to Kubernetes."""
