"""The farm under real deployment: cold starts, lost messages, services restarting mid-sweep."""
