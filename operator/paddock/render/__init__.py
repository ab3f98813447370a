"""Pure functions from specs to Kubernetes manifests and scripts. No I/O, no API calls."""
