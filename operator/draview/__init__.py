"""draview: exact availability of DRA devices."""
