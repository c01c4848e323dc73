"""The stack configuration: typed models, the rules a value must follow, and loading.

Above ``infra.facts``; nothing here computes a plan (checks that need one live in
``infra.validate``).
"""
