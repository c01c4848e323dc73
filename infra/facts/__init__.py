"""Checked-in tables: instance facts, prices, pinned versions, EKS add-ons.

The bottom layer: imports nothing else from the project.
"""
