"""Adapters: everything that touches files, clocks or the cloud."""
