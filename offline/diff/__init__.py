"""What a change does: this checkout's plan against a base revision's, with replacements named."""
