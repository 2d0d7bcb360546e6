"""Input models (Kubernetes objects, normalised) and output status shapes."""
