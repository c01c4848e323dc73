"""Run the real Pulumi programs offline under Pulumi's mock runtime (plan and tests)."""
