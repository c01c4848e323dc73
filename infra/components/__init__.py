"""One ``pulumi.ComponentResource`` per concern, each with a typed args dataclass, plus the
small helpers they share (IAM documents, Kubernetes helpers, launch-template arguments).
"""
