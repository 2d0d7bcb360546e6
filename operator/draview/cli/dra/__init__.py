"""`kubectl dra` subcommands, one module each; shared plumbing in common/kubectl/source."""
