"""The project's Pulumi policy pack: its rules are in ``guardrails``; `make plan` runs them offline
(offline/plan/policy_run.py)."""
