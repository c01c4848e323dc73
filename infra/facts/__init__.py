"""Checked-in tables: instance facts, prices, pinned versions, EKS add-ons, stack outputs.

The bottom layer: imports nothing else from the project.
"""
