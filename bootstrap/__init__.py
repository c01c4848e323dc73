"""The bootstrap project (a Pulumi project of its own): what the pipeline needs in one AWS account."""
