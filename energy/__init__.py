"""VM power model and energy accounting (not yet built)."""
