"""`make docs`: the reference, the pictures and the layout, generated from the code and the plan."""
