"""What a plan shows: the resource table, the cost estimate, the architecture picture."""
