"""driver_integration package."""
