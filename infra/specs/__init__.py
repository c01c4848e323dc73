"""Pure computations from configuration and facts: network plan, EFA layout, placement,
node templates, user data, system capacity, pod security. No Pulumi resources here.
"""
