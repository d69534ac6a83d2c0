"""archive package."""
