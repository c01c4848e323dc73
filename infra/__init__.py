"""Component resources and pure computations for the Trainium EKS cluster stack."""
