"""The project's Pulumi policy pack: rules in ``guardrails``, the offline run in ``offline``."""
