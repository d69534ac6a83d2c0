"""The archive sidecar service: conductor, control sessions, recorder, replayer and their agents."""
